"""A request's sampling fields, checked once for every route (OpenAI's and Ollama's).

Each value no backend can use is refused here with a 400 that names its field, instead of
failing later as a server error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from swapos.data.constraint import Constraint
from swapos.data.generation import DraftRequest
from swapos.data.sampling import SamplingParams
from swapos.serve.errors import RequestError

SEED_MAX = 2**63 - 1
DEFAULTS = SamplingParams()


@dataclass(frozen=True)
class Sampling:
    """What a request asks of sampling (None: the server's default), checked."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    repeat_penalty: float | None = None
    repeat_last_n: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: tuple[tuple[int, float], ...] = ()
    num_ctx: int | None = None
    prefix: str = ""
    """What field names are shown under in errors (``options.`` on Ollama's routes)."""

    def __post_init__(self) -> None:
        self._check()

    def params(
        self, *, max_tokens: int, draft: DraftRequest, constraint: Constraint | None
    ) -> SamplingParams:
        """The backend's sampling parameters (greedy unless a temperature is given)."""

        def pick(value: Any, default: Any) -> Any:
            return default if value is None else value

        return SamplingParams(
            max_tokens=max_tokens,
            stop=self.stop,
            temperature=pick(self.temperature, 0.0),
            seed=pick(self.seed, 0),
            top_p=pick(self.top_p, DEFAULTS.top_p),
            top_k=pick(self.top_k, DEFAULTS.top_k),
            min_p=pick(self.min_p, DEFAULTS.min_p),
            repeat_penalty=pick(self.repeat_penalty, DEFAULTS.repeat_penalty),
            repeat_last_n=pick(self.repeat_last_n, DEFAULTS.repeat_last_n),
            presence_penalty=pick(self.presence_penalty, DEFAULTS.presence_penalty),
            frequency_penalty=pick(self.frequency_penalty, DEFAULTS.frequency_penalty),
            logit_bias=self.logit_bias,
            draft=draft,
            constraint=constraint,
        )

    def _check(self) -> None:
        p = self.prefix
        _at_least(self.max_tokens, 1, p + "max_tokens")
        _number(self.temperature, 0.0, math.inf, p + "temperature")
        _number(self.top_p, 0.0, 1.0, p + "top_p")
        _number(self.min_p, 0.0, 1.0, p + "min_p")
        _number(self.repeat_penalty, 1e-6, math.inf, p + "repeat_penalty")
        _number(self.presence_penalty, -2.0, 2.0, p + "presence_penalty")
        _number(self.frequency_penalty, -2.0, 2.0, p + "frequency_penalty")
        _at_least(self.top_k, 0, p + "top_k")
        _at_least(self.repeat_last_n, -1, p + "repeat_last_n")
        _at_least(self.num_ctx, 1, p + "num_ctx")
        if self.seed is not None and not 0 <= self.seed <= SEED_MAX:
            raise RequestError(
                400, f"{p}seed must be between 0 and {SEED_MAX}, got {self.seed}", p + "seed"
            )


def _number(value: float | None, low: float, high: float, field: str) -> None:
    if value is None:
        return
    if not (math.isfinite(value) and low <= value <= high):
        bounds = f"at least {low}" if high == math.inf else f"between {low} and {high}"
        raise RequestError(400, f"{field} must be a number {bounds}, got {value}", field)


def _at_least(value: int | None, low: int, field: str) -> None:
    if value is not None and value < low:
        raise RequestError(400, f"{field} must be at least {low}, got {value}", field)


def stops(stop: str | list[str] | None) -> tuple[str, ...]:
    """``stop`` as a tuple (one string, a list, or none)."""
    if stop is None:
        return ()
    return (stop,) if isinstance(stop, str) else tuple(stop)


def logit_bias(bias: dict[str, float] | None) -> tuple[tuple[int, float], ...]:
    """OpenAI's ``logit_bias`` (token id as text -> bias in [-100, 100]) as pairs.

    Raises:
        RequestError: a key that is not a token id, or a bias out of range.
    """
    out = []
    for key, value in (bias or {}).items():
        if not key.isdigit():
            raise RequestError(400, f"logit_bias keys are token ids, got {key!r}", "logit_bias")
        if not (math.isfinite(value) and -100 <= value <= 100):
            raise RequestError(
                400, f"logit_bias[{key}] must be between -100 and 100, got {value}", "logit_bias"
            )
        out.append((int(key), float(value)))
    return tuple(out)


def sampling_of(body: Any) -> Sampling:
    """The sampling an OpenAI request (chat or completion) asks for.

    Raises:
        RequestError: a value out of range (named).
    """
    max_tokens = getattr(body, "max_completion_tokens", None) or body.max_tokens
    return Sampling(
        max_tokens=max_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        top_k=body.top_k,
        min_p=body.min_p,
        seed=body.seed,
        stop=stops(body.stop),
        repeat_penalty=body.repeat_penalty,
        repeat_last_n=body.repeat_last_n,
        presence_penalty=body.presence_penalty,
        frequency_penalty=body.frequency_penalty,
        logit_bias=logit_bias(body.logit_bias),
    )


def with_max_tokens(sampling: Sampling, max_tokens: int | None) -> Sampling:
    """``sampling`` with another ``max_tokens``."""
    return replace(sampling, max_tokens=max_tokens)
