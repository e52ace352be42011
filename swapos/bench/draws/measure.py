"""The draws bench's measurements: one prompt's draws in turn and side by side, timed.

Backend-generic (any loaded model that is a :class:`~swapos.backends.base.DrawsModel`) and
on an injected ``now``, so the fake backend on a FakeClock tests it exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol

import msgspec

from swapos.backends.base import DrawOutput, DrawsModel, GenerationOutput, LoadedModel
from swapos.bench.swap.stats import TargetCheck
from swapos.data.prefix import PrefixState
from swapos.data.sampling import SamplingParams

WALL_RATIO_LIMIT = 0.75
"""Issue 26: six draws of the 0.5B side by side finish in at most this share of the wall of
the same draws in turn."""


class DrawingModel(LoadedModel, DrawsModel, Protocol):
    """A loaded model that also draws side by side."""


class DrawCompared(msgspec.Struct, frozen=True, kw_only=True):
    """One draw, in turn and side by side (``common_chars``: how far their texts agree)."""

    seed: int
    same_text: bool
    common_chars: int
    turn_tokens: int
    side_tokens: int
    turn_stop: str
    side_stop: str


class PromptRun(msgspec.Struct, frozen=True, kw_only=True):
    """One prompt's draws, both ways, in one round.

    Attributes:
        first: which way ran first (rounds and prompts alternate it).
        turn_s, side_s: the wall of all the draws in turn, and side by side.
        turn_tokens, side_tokens: the tokens they generated.
    """

    task_id: str
    round: int
    prompt_tokens: int
    first: Literal["turn", "side"]
    turn_s: float
    side_s: float
    turn_tokens: int
    side_tokens: int
    draws: list[DrawCompared]


async def measure_prompt(
    model: DrawingModel,
    task_id: str,
    tokens: list[int],
    params: Sequence[SamplingParams],
    *,
    restore: PrefixState | None,
    round_: int,
    side_first: bool,
    now: Callable[[], float],
) -> PromptRun:
    """Decode ``params``' draws of ``tokens`` in turn and side by side (``side_first``: that
    way first), each from the same restored prompt state."""
    turn: list[GenerationOutput] = []
    side: list[DrawOutput] = []
    walls: dict[str, float] = {}

    async def in_turn() -> None:
        t0 = now()
        for p in params:
            turn.append(await model.generate(tokens, p, restore=restore))
        walls["turn"] = now() - t0

    async def side_by_side() -> None:
        t0 = now()
        side.extend(await model.generate_draws(tokens, params, restore=restore))
        walls["side"] = now() - t0

    for way in (side_by_side, in_turn) if side_first else (in_turn, side_by_side):
        await way()
    by = {d.index: d.output for d in side}
    compared = [
        DrawCompared(
            seed=p.seed,
            same_text=by[i].text == turn[i].text,
            common_chars=_common_chars(by[i].text, turn[i].text),
            turn_tokens=turn[i].stats.tokens,
            side_tokens=by[i].stats.tokens,
            turn_stop=turn[i].stats.stop_reason,
            side_stop=by[i].stats.stop_reason,
        )
        for i, p in enumerate(params)
    ]
    return PromptRun(
        task_id=task_id,
        round=round_,
        prompt_tokens=len(tokens),
        first="side" if side_first else "turn",
        turn_s=walls["turn"],
        side_s=walls["side"],
        turn_tokens=sum(c.turn_tokens for c in compared),
        side_tokens=sum(c.side_tokens for c in compared),
        draws=compared,
    )


def _common_chars(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


class DrawsSummary(msgspec.Struct, frozen=True, kw_only=True):
    """The runs' totals: wall both ways, their ratio, the share of draws whose text is the
    same both ways, and the issue's target checked on the ratio."""

    turn_s: float
    side_s: float
    ratio: float
    turn_tok_s: float
    side_tok_s: float
    same_text_share: float
    targets: list[TargetCheck]


def summarize(runs: Sequence[PromptRun], *, draws: int) -> DrawsSummary:
    """Totals over ``runs`` (the ratio is of summed walls: every prompt weighs its time)."""
    turn = sum(r.turn_s for r in runs)
    side = sum(r.side_s for r in runs)
    compared = [c for r in runs for c in r.draws]
    ratio = side / turn if turn > 0 else 0.0
    detail = (
        f"{len(runs)} prompt runs x {draws} draws: {side:.2f}s side by side, {turn:.2f}s in "
        f"turn; {sum(r.side_tokens for r in runs)} and {sum(r.turn_tokens for r in runs)} tokens"
    )
    return DrawsSummary(
        turn_s=turn,
        side_s=side,
        ratio=ratio,
        turn_tok_s=sum(r.turn_tokens for r in runs) / turn if turn > 0 else 0.0,
        side_tok_s=sum(r.side_tokens for r in runs) / side if side > 0 else 0.0,
        same_text_share=sum(c.same_text for c in compared) / len(compared) if compared else 0.0,
        targets=[
            TargetCheck(
                name=f"{draws} draws side by side / in turn, wall",
                condition="warm",
                value=ratio,
                limit=WALL_RATIO_LIMIT,
                met=bool(runs) and ratio <= WALL_RATIO_LIMIT,
                detail=detail,
            )
        ],
    )
