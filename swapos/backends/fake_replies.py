"""What a fake model writes: its reply under a grammar, and a draw's pieces stepped side by
side (:mod:`swapos.backends.fake` plays them on the clock)."""

from __future__ import annotations

import json

from swapos.backends.base import GenerationOutput
from swapos.backends.stops import StopStream
from swapos.data.constraint import Constraint
from swapos.data.generation import GenerationStats, StopReason
from swapos.data.sampling import SamplingParams


def constrained_reply(reply: str, constraint: Constraint | None) -> str:
    """What a fake model answers under ``constraint``: its scripted reply where that has
    the shape of the constraint's example (the same text around one JSON value that
    parses), else the example itself; a lazy constraint (free text until a call starts)
    leaves the reply as scripted."""
    if constraint is None or constraint.lazy or _same_shape(reply, constraint.example):
        return reply
    return constraint.example


def _same_shape(reply: str, example: str) -> bool:
    starts = [i for i in (example.find("{"), example.find("[")) if i >= 0]
    start = min(starts) if starts else 0
    try:
        _, end = json.JSONDecoder().raw_decode(example, start)
    except json.JSONDecodeError:
        return reply == example
    before, after = example[:start], example[end:]
    if not (reply.startswith(before) and reply.endswith(after)):
        return False
    try:
        json.loads(reply[len(before) : len(reply) - len(after)])
    except json.JSONDecodeError:
        return False
    return True


class FakeDraw:
    """One draw of :meth:`FakeModel.generate_draws`: its reply's pieces, one per step."""

    def __init__(self, index: int, params: SamplingParams, reply: str) -> None:
        words = reply.split(" ") if reply else []
        self.index, self.params = index, params
        self.pieces = words[:1] + [" " + w for w in words[1:]]
        self.stream = StopStream(params.stop)
        self.n, self.first, self.end = 0, 0.0, 0.0
        self.reason: StopReason = "eos"

    @property
    def empty(self) -> bool:
        """Nothing to sample: it ends before any step, as a generation in turn would."""
        return not self.pieces or self.params.max_tokens <= 0

    def step(self, now: float) -> bool:
        """Sample one piece at ``now``; True when the draw has ended (the rules of
        ``FakeModel._decode``: a stop sequence, the reply's end, ``max_tokens``)."""
        if self.n == 0:
            self.first = now
        self.end = now
        self.stream.add(self.pieces[self.n])
        self.n += 1
        if self.stream.stopped:
            self.reason = "stop"
            return True
        if self.n < len(self.pieces) and self.n < self.params.max_tokens:
            return False
        self.reason = "eos" if self.n == len(self.pieces) else "length"
        self.stream.finish()
        return True

    def output(
        self, prompt: list[int], restored: int, start: float, prefill_s: float
    ) -> GenerationOutput:
        stats = GenerationStats(
            prompt_tokens=len(prompt),
            kv_restored_tokens=restored,
            prefill_tokens=len(prompt) - restored,
            prefill_s=prefill_s,
            ttft_s=self.first - start,
            tokens=self.n,
            gen_s=self.end - self.first,
            stop_reason=self.reason,
        )
        kept = "".join(self.pieces[: self.n if self.reason == "eos" else max(self.n - 1, 0)])
        return GenerationOutput(
            text=self.stream.text, stats=stats, read=(*prompt, *(ord(c) for c in kept))
        )
