"""The timeline of a run as bars, one lane per model: a pure fold of its events.

What the live page of ``swapos serve`` (``/ui``) draws while it happens, and what the HTML
report of a run (``bench report --html``, ``run --html``, ``bench replay --html``) draws
after: the same fold, fed by the Recorder live or by an event log.

A model's lane holds its residency (loads, evictions, KV restores) and its requests (one
bar per phase that used it). A finished load is split by what the phases paid for it:

- ``paid``: the part of the load a phase waited for on its critical path (its
  ``LeaseGranted.load_s``, the end of the load);
- ``hidden``: the part that ran before anyone waited (a prefetch): the rest of it;
- ``load``: a load no phase has claimed (an explicit load, ``POST /ui/load``).

A prefetch nobody has used yet is drawn ``hidden``; a later lease that paid part of it
splits it. Bars are upserted by ``id``: :meth:`Timeline.feed` returns the bars an event
opened or changed, so a reader that keeps bars by id stays in step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import msgspec

from swapos.messages.events import (
    AnyEvent,
    FirstToken,
    GenerationFinished,
    GenerationProgress,
    KVHit,
    KVRestoreFailed,
    LeaseGranted,
    ModelEvicted,
    ModelEvictStarted,
    ModelLoadCancelled,
    ModelLoaded,
    ModelLoadFailed,
    ModelLoadStarted,
    PhaseFinished,
    PhaseStarted,
)

BarKind = Literal["request", "loading", "load", "hidden", "paid", "failed", "evict", "kv"]
RESIDENCY_KINDS: frozenset[str] = frozenset(
    {"loading", "load", "hidden", "paid", "failed", "evict", "kv"}
)
"""Kinds drawn on a lane's residency strip; ``request`` bars go on its request strip."""
GRADER_LANE = "(grader)"
"""The lane of phases without a model (the grader, a self-check)."""


class Bar(msgspec.Struct, kw_only=True):
    """One interval (or instant: ``end == start``) on a lane.

    Attributes:
        id: stable across updates (``load-3``, ``load-3-paid``, ``req-<phase id>``).
        lane: the model's name (:data:`GRADER_LANE` for phases without one).
        kind: see :data:`BarKind` and the module's docstring.
        start, end: seconds since the run started; ``end`` is None while it is open.
        label: what it is, as text (a task id and phase, ``prefetch``, a reason).
        tokens, tok_s: a request's generated tokens and decode rate so far.
        expect_s: a load in flight: how long the model's previous load took (0: unknown).
        outcome: a request's outcome or a load's (``cancelled``, the failure reason).
    """

    id: str
    lane: str
    kind: BarKind
    start: float
    end: float | None = None
    label: str = ""
    tokens: int = 0
    tok_s: float = 0.0
    expect_s: float = 0.0
    outcome: str = ""


class Timeline:
    """Folds events into bars. Feed events in log order; read :attr:`bars` at any time."""

    def __init__(self) -> None:
        self.bars: dict[str, Bar] = {}
        """Every bar kept, by id, in the order opened."""
        self.estimate_bytes: dict[str, int] = {}
        """Each model's latest footprint estimate (its last ``ModelLoadStarted``)."""
        self._loading: dict[str, Bar] = {}
        self._unclaimed: dict[str, Bar] = {}
        self._evicting: dict[str, Bar] = {}
        self._last_load_s: dict[str, float] = {}
        self._first_token: dict[str, float] = {}
        self._last_kv: dict[str, Bar] = {}
        self._n = 0

    def feed(self, ev: AnyEvent) -> list[Bar]:
        """Fold ``ev``; the bars it opened or changed (empty for most events)."""
        match ev:
            case ModelLoadStarted(model=str(m)):
                return self._load_started(m, ev)
            case ModelLoaded(model=str(m)) if m in self._loading:
                return self._loaded(m, ev)
            case ModelLoadFailed(model=str(m)) | ModelLoadCancelled(model=str(m)) if (
                m in self._loading
            ):
                return [self._close(self._loading.pop(m), ev.t, kind="failed", outcome=ev.reason)]
            case LeaseGranted(model=str(m)) if m in self._unclaimed and (
                ev.load_s > 0 or ev.load_hidden_s > 0
            ):
                return self._claimed(self._unclaimed.pop(m), ev.load_s)
            case ModelEvictStarted(model=str(m)):
                bar = self._add(m, "evict", ev.t, None, label=ev.reason)
                self._evicting[m] = bar
                return [bar]
            case ModelEvicted(model=str(m)):
                self._unclaimed.pop(m, None)
                started = self._evicting.pop(m, None)
                evicting = started if started is not None else self._add(m, "evict", ev.t, None)
                return [self._close(evicting, ev.t, label=ev.reason)]
            case KVHit(model=str(m)):
                bar = self._add(m, "kv", ev.t, ev.t, label=f"{ev.tokens} tokens restored")
                bar.tokens = ev.tokens
                self._last_kv[m] = bar
                return [bar]
            case KVRestoreFailed(model=str(m)) if m in self._last_kv:
                bar = self._last_kv.pop(m)
                bar.kind, bar.outcome = "failed", ev.reason
                return [bar]
            case _:
                return self._request(ev)

    def _request(self, ev: AnyEvent) -> list[Bar]:
        match ev:
            case PhaseStarted(phase_id=str(pid)):
                label = f"{ev.task_id or ''} {ev.phase}".strip()
                lane = ev.model or GRADER_LANE
                bar = Bar(id=f"req-{pid}", lane=lane, kind="request", start=ev.t, label=label)
                self.bars[bar.id] = bar
                return [bar]
            case FirstToken(phase_id=str(pid)):
                self._first_token[pid] = ev.t
            case GenerationProgress(phase_id=str(pid)) if f"req-{pid}" in self.bars:
                bar = self.bars[f"req-{pid}"]
                bar.tokens = ev.tokens
                first = self._first_token.get(pid)
                if first is not None and ev.t > first and ev.tokens > 1:
                    bar.tok_s = (ev.tokens - 1) / (ev.t - first)
                return [bar]
            case GenerationFinished(phase_id=str(pid)) if f"req-{pid}" in self.bars:
                bar, stats = self.bars[f"req-{pid}"], ev.stats
                bar.tokens = stats.tokens
                decoding = stats.tokens > 1 and stats.gen_s > 0
                bar.tok_s = (stats.tokens - 1) / stats.gen_s if decoding else 0.0
                return [bar]
            case PhaseFinished(phase_id=str(pid)) if f"req-{pid}" in self.bars:
                self._first_token.pop(pid, None)
                return [self._close(self.bars[f"req-{pid}"], ev.t, outcome=ev.outcome)]
            case _:
                pass
        return []

    def _load_started(self, model: str, ev: ModelLoadStarted) -> list[Bar]:
        self.estimate_bytes[model] = ev.estimate_bytes
        self._unclaimed.pop(model, None)
        label = "prefetch" if ev.speculative else "load"
        bar = self._add(model, "loading", ev.t, None, label=label)
        bar.expect_s = self._last_load_s.get(model, 0.0)
        self._loading[model] = bar
        return [bar]

    def _loaded(self, model: str, ev: ModelLoaded) -> list[Bar]:
        bar = self._close(
            self._loading.pop(model), ev.t, kind="hidden" if ev.speculative else "load"
        )
        self._last_load_s[model] = ev.load_s
        self._unclaimed[model] = bar
        return [bar]

    def _claimed(self, bar: Bar, paid_s: float) -> list[Bar]:
        """Split a finished load by the ``paid_s`` a phase's lease reported for it."""
        end = bar.end if bar.end is not None else bar.start
        paid_s = min(max(paid_s, 0.0), end - bar.start)
        if paid_s <= 0:
            bar.kind = "hidden"
            return [bar]
        if paid_s >= end - bar.start:
            bar.kind = "paid"
            return [bar]
        bar.kind, bar.end = "hidden", end - paid_s
        paid = Bar(
            id=f"{bar.id}-paid", lane=bar.lane, kind="paid", start=bar.end, end=end, label=bar.label
        )
        self.bars[paid.id] = paid
        return [bar, paid]

    def _add(
        self, lane: str, kind: BarKind, start: float, end: float | None, label: str = ""
    ) -> Bar:
        self._n += 1
        prefix = "load" if kind == "loading" else kind
        bar = Bar(id=f"{prefix}-{self._n}", lane=lane, kind=kind, start=start, end=end, label=label)
        self.bars[bar.id] = bar
        return bar

    @staticmethod
    def _close(
        bar: Bar, t: float, *, kind: BarKind | None = None, label: str = "", outcome: str = ""
    ) -> Bar:
        bar.end = t
        bar.kind = kind or bar.kind
        bar.label = label or bar.label
        bar.outcome = outcome or bar.outcome
        return bar

    def prune(self, before: float, keep: int) -> None:
        """Forget closed bars that ended before ``before``, and the oldest closed ones
        beyond ``keep`` bars (open bars are always kept): the live page's window."""
        closed = [b for b in self.bars.values() if b.end is not None]
        over = len(self.bars) - keep
        for i, bar in enumerate(closed):
            if bar.end is not None and (bar.end < before or i < over):
                self.bars.pop(bar.id, None)
                self._drop_refs(bar)

    def _drop_refs(self, bar: Bar) -> None:
        for table in (self._unclaimed, self._last_kv):
            if table.get(bar.lane) is bar:
                del table[bar.lane]


def timeline(events: Iterable[AnyEvent]) -> Timeline:
    """The timeline of a whole event log."""
    fold = Timeline()
    for ev in events:
        fold.feed(ev)
    return fold


def lanes(bars: Iterable[Bar]) -> list[str]:
    """The lanes of ``bars``: models by name, the grader's lane last."""
    names = {b.lane for b in bars}
    return sorted(names - {GRADER_LANE}) + ([GRADER_LANE] if GRADER_LANE in names else [])


def pack(bars: Iterable[Bar], now: float) -> list[tuple[Bar, int]]:
    """Each bar with its row: bars that overlap go on different rows (open bars end at
    ``now``); the first row that is free at a bar's start takes it."""
    ends: list[float] = []
    out = []
    for bar in sorted(bars, key=lambda b: (b.start, b.id)):
        end = bar.end if bar.end is not None else now
        row = next((i for i, e in enumerate(ends) if e <= bar.start), len(ends))
        if row == len(ends):
            ends.append(end)
        else:
            ends[row] = end
        out.append((bar, row))
    return out
