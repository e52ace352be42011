"""A model's verification cost curve: what a decode batch of K tokens (logits at each) costs
against a batch of one, with the plain step's wall and the prefill rate.

``bench decode`` measures it in one go (:func:`measure_curve`); a served model that has no
measured costs measures it in the background a round at a time while it is idle
(:mod:`~swapos.backends.llama.calibration`). Both drive a :class:`CurveMeter`: the context is
prefilled once, then each *round* times one batch of every size in a rotated order, dropping
the batch's cells after it; the first round warms caches and is not kept. Synchronous: it runs
in a worker thread holding the model's lock.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import llama_cpp
import msgspec

from swapos.backends.llama import kv_state
from swapos.backends.llama.batch import VerifyBatch
from swapos.backends.llama.handles import Handles
from swapos.backends.llama.vocab import tokenize

CONTEXT_TEXT = "def f(x):\n    return x + 1\n\n"
"""What the measuring context repeats (code, as the pipeline's prompts are)."""


class CurvePoint(msgspec.Struct, frozen=True, kw_only=True):
    """A verification batch of ``tokens`` tokens: its median wall and its ratio to one."""

    tokens: int
    ms: float
    ratio: float


class Curve(msgspec.Struct, frozen=True, kw_only=True):
    """One model's cost curve and rates (after ``context_tokens`` tokens of context)."""

    context_tokens: int
    repeats: int
    ms_per_token: float
    decode_tok_s: float
    prefill_tok_s: float
    points: list[CurvePoint]

    def verify_ratio(self) -> tuple[float, ...]:
        """Ratios for every batch size 1..largest measured, linear between measured ones."""
        pts = sorted(self.points, key=lambda p: p.tokens)
        out = [1.0]
        for size in range(2, pts[-1].tokens + 1):
            hi = next(p for p in pts if p.tokens >= size)
            lo = max((p for p in pts if p.tokens <= size), key=lambda p: p.tokens)
            span = hi.tokens - lo.tokens
            w = 0.0 if span == 0 else (size - lo.tokens) / span
            out.append(round(lo.ratio + w * (hi.ratio - lo.ratio), 4))
        return tuple(out)


def measuring_context(h: Handles, tokens: int) -> list[int]:
    """``tokens`` tokens of :data:`CONTEXT_TEXT` in the model's vocabulary."""
    return tokenize(h.vocab, CONTEXT_TEXT * (1 + tokens // 8))[:tokens]


class CurveMeter:
    """The measurement of one curve, a step at a time: :meth:`prefill`, then ``repeats + 1``
    :meth:`round` calls (each after a prefill of the same context, which a generation run
    between two rounds clears), then :meth:`curve`."""

    def __init__(self, context: list[int], sizes: Sequence[int], repeats: int) -> None:
        self.context = context
        self.sizes = sorted({1, *sizes})
        self.repeats = repeats
        self.rounds = 0
        self.prefill_s = 0.0
        self._times: dict[int, list[float]] = {s: [] for s in self.sizes}

    @property
    def done(self) -> bool:
        return self.rounds > self.repeats

    def prefill(self, h: Handles) -> None:
        """Empty the KV cache and decode the context (timed)."""
        kv_state.clear(h.ctx)
        started = time.perf_counter()
        for i in range(0, len(self.context), h.n_batch):
            chunk = self.context[i : i + h.n_batch]
            arr = (llama_cpp.llama_token * len(chunk))(*chunk)
            if llama_cpp.llama_decode(h.ctx, llama_cpp.llama_batch_get_one(arr, len(chunk))) != 0:
                raise RuntimeError("prefill failed while measuring the cost curve")
        self.prefill_s = time.perf_counter() - started

    def round(self, h: Handles) -> None:
        """Time one batch of each size at the end of the prefilled context."""
        at = len(self.context)
        filler = (self.context * (1 + max(self.sizes) // max(1, at)))[: max(self.sizes)]
        turn = self.rounds % len(self.sizes)
        batch = VerifyBatch(max(self.sizes))
        try:
            for size in self.sizes[turn:] + self.sizes[:turn]:
                t0 = time.perf_counter()
                if batch.decode(h.ctx, filler[:size], at) != 0:
                    raise RuntimeError(f"a {size}-token batch failed while measuring")
                dt = time.perf_counter() - t0
                if self.rounds > 0:  # the first round warms caches
                    self._times[size].append(dt)
                kv_state.truncate(h.ctx, at)
        finally:
            batch.close()
        self.rounds += 1

    def curve(self) -> Curve:
        """The medians of the rounds kept."""
        ms = {s: 1000 * statistics.median(v) for s, v in self._times.items()}
        at = len(self.context)
        return Curve(
            context_tokens=at, repeats=self.repeats, ms_per_token=ms[1],
            decode_tok_s=1000 / ms[1], prefill_tok_s=at / self.prefill_s if self.prefill_s else 0.0,
            points=[CurvePoint(tokens=s, ms=ms[s], ratio=ms[s] / ms[1]) for s in self.sizes],
        )  # fmt: skip


def measure_curve(h: Handles, context: list[int], sizes: Sequence[int], repeats: int) -> Curve:
    """Time batches of each size (logits at every position) at the end of ``context``,
    interleaved, dropping their cells after each; and the context's prefill."""
    meter = CurveMeter(context, sizes, repeats)
    try:
        meter.prefill(h)
        while not meter.done:
            meter.round(h)
    finally:
        kv_state.clear(h.ctx)
    return meter.curve()
