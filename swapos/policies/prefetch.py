"""Whether to prefetch the next model by a full load or only a page-cache warm-up.

On a GPU box a speculative load overlaps generation for free. On a small CPU box (2 cores
here) a page-cached load competes with generation for the CPU: it can slow the running
phase by about as much as it saves the next one. :class:`CostModel` learns, from the run's
own phases, what a speculative load costs (how much it slows the generation it overlaps)
and what it saves (the load the next phase would otherwise pay), and picks the cheaper.
A load is learned in its two parts: the file read (page cache or disk, and host setup) and
the upload of offloaded layers to a GPU, per device; a page-cache warm-up can only save the
first, a full load saves both.
Pure and synchronous: the Prefetcher feeds it observations and asks it for decisions.
"""

from __future__ import annotations

from typing import Literal

import msgspec

PrefetchKind = Literal["load", "warm"]

ALPHA = 0.4
"""Weight of the newest observation in every moving average."""

MARGIN = 1.1
"""A full load must be expected to save this many times what it costs."""


def ewma(old: float | None, new: float, alpha: float = ALPHA) -> float:
    """Exponentially weighted moving average; the first observation is taken as is."""
    return new if old is None else alpha * new + (1 - alpha) * old


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """A prefetch decision and the numbers behind it (recorded in the event log)."""

    kind: PrefetchKind
    reason: str


class CostModel:
    """Moving averages of load and decode costs, per model.

    Attributes:
        spec_load_s: duration of speculative loads (measured while overlapping generation).
        paid_load_s: load time a phase paid after its model was only warmed.
        rate_alone: decode tokens/s of a model with no speculative load running.
        overlapped: ``(tokens, gen_s)`` averages of a model's generations that a
            speculative load overlapped.
        read_s: the file-read part of a model's loads (everything but the upload).
        upload_s: the upload part, per ``(model, device)``.
        device: the device a model's layers last went to ("" for a CPU-only load).
    """

    def __init__(self) -> None:
        self.spec_load_s: dict[str, float] = {}
        self.paid_load_s: dict[str, float] = {}
        self.rate_alone: dict[str, float] = {}
        self.overlapped: dict[str, tuple[float, float]] = {}
        self.read_s: dict[str, float] = {}
        self.upload_s: dict[tuple[str, str], float] = {}
        self.device: dict[str, str] = {}

    def observe_speculative_load(self, model: str, seconds: float) -> None:
        self.spec_load_s[model] = ewma(self.spec_load_s.get(model), seconds)

    def observe_paid_load(self, model: str, seconds: float) -> None:
        self.paid_load_s[model] = ewma(self.paid_load_s.get(model), seconds)

    def observe_load_parts(self, model: str, read_s: float, upload_s: float, device: str) -> None:
        """One load of ``model`` split into its file read and its upload to ``device``
        ("" and 0 for a load that offloads nothing)."""
        self.read_s[model] = ewma(self.read_s.get(model), read_s)
        self.device[model] = device
        if device:
            key = (model, device)
            self.upload_s[key] = ewma(self.upload_s.get(key), upload_s)

    def load_estimate_s(self, model: str) -> float | None:
        """Expected seconds of a load of ``model``: read + upload to its device (None until
        a load was seen)."""
        if model not in self.read_s:
            return None
        device = self.device.get(model, "")
        return self.read_s[model] + self.upload_s.get((model, device), 0.0)

    def upload_estimate_s(self, model: str) -> float:
        """Expected upload seconds of ``model`` to its device (0 on a CPU-only load)."""
        return self.upload_s.get((model, self.device.get(model, "")), 0.0)

    def saving_s(self, model: str) -> float:
        """What a full speculative load of ``model`` saves its phase over a warm-up: the
        load it was measured to pay after a warm-up, or, before that, its learned load
        (read + upload: the warm-up may not even finish the read), or the speculative
        loads' duration, or 0 when nothing is known."""
        if model in self.paid_load_s:
            return self.paid_load_s[model]
        learned = self.load_estimate_s(model)
        if learned is not None:
            return learned
        return self.spec_load_s.get(model, 0.0)

    def observe_generation(
        self, model: str, tokens: int, gen_s: float, *, overlapped: bool
    ) -> None:
        """One phase's decode, sorted by whether a speculative load overlapped it."""
        if tokens < 2 or gen_s <= 0:
            return
        if not overlapped:
            self.rate_alone[model] = ewma(self.rate_alone.get(model), (tokens - 1) / gen_s)
            return
        old = self.overlapped.get(model)
        self.overlapped[model] = (
            ewma(old[0] if old else None, float(tokens)),
            ewma(old[1] if old else None, gen_s),
        )

    def overlap_cost_s(self, model: str) -> float | None:
        """Seconds a speculative load adds to a generation of ``model`` (None: unknown):
        its overlapped decode time minus the time the same tokens take alone."""
        alone, seen = self.rate_alone.get(model), self.overlapped.get(model)
        if alone is None or seen is None or alone <= 0:
            return None
        tokens, gen_s = seen
        return max(0.0, gen_s - (tokens - 1) / alone)

    def decide(self, next_model: str, running_model: str | None) -> Decision:
        """Full load or warm-up for ``next_model`` while ``running_model`` generates.

        A full load costs the running phase what overlapping loads have been measured to
        add to its generations, and saves the next phase the load it pays after a warm-up.
        Until a model's generations have been seen both with and without a concurrent load,
        the policy explores: first a load, then a warm-up.
        """
        if running_model is None:
            return Decision(kind="load", reason="nothing is generating")
        if running_model not in self.overlapped:
            return Decision(kind="load", reason="learning: load cost not measured yet")
        cost = self.overlap_cost_s(running_model)
        if cost is None:
            return Decision(
                kind="warm", reason=f"learning: measuring {running_model} without a load"
            )
        saving = self.saving_s(next_model)
        if saving >= MARGIN * cost:
            upload = self.upload_estimate_s(next_model)
            also = f" (upload ~{upload:.2f}s a warm-up cannot do)" if upload > 0 else ""
            return Decision(
                kind="load",
                reason=f"saves ~{saving:.2f}s{also}, slows {running_model} ~{cost:.2f}s",
            )
        return Decision(
            kind="warm",
            reason=f"a full load would slow {running_model} ~{cost:.2f}s to save "
            f"~{saving:.2f}s: warm the page cache only",
        )
