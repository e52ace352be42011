"""The timeline fold (swapos/records/timeline.py): bars from events, loads split by what
the phases paid for them. Pure: events in, bars out."""

from __future__ import annotations

from swapos.data.generation import GenerationStats
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
    ModelLoadStarted,
    PhaseFinished,
    PhaseStarted,
)
from swapos.records.timeline import GRADER_LANE, Bar, Timeline, lanes, pack, timeline


def load(m: str, start: float, end: float, *, speculative: bool) -> list[AnyEvent]:
    return [
        ModelLoadStarted(t=start, model=m, speculative=speculative, estimate_bytes=100),
        ModelLoaded(
            t=end,
            model=m,
            load_s=end - start,
            speculative=speculative,
            estimate_bytes=100,
            measured_bytes=100,
        ),
    ]


def lease(m: str, t: float, *, paid: float, hidden: float) -> LeaseGranted:
    return LeaseGranted(
        t=t, model=m, lease_id=f"l{t}", load_s=paid, evict_s=0.0, load_hidden_s=hidden, joined=False
    )


def kinds(fold: Timeline, lane: str) -> list[tuple[str, float, float | None]]:
    return [(b.kind, b.start, b.end) for b in fold.bars.values() if b.lane == lane]


def test_a_prefetch_a_phase_joined_is_split_into_hidden_then_paid() -> None:
    # b's prefetch ran 2..10; a phase asked for b at 6 and waited the last 4 seconds.
    fold = timeline(
        [*load("b", 2.0, 10.0, speculative=True), lease("b", 10.0, paid=4.0, hidden=4.0)]
    )
    assert kinds(fold, "b") == [("hidden", 2.0, 6.0), ("paid", 6.0, 10.0)]


def test_an_urgent_load_is_paid_and_a_finished_prefetch_hidden() -> None:
    events = [
        *load("a", 0.0, 2.0, speculative=False),
        lease("a", 2.0, paid=2.0, hidden=0.0),
        *load("b", 3.0, 5.0, speculative=True),
        lease("b", 9.0, paid=0.0, hidden=2.0),  # asked long after the prefetch ended
        lease("b", 12.0, paid=0.0, hidden=0.0),  # resident: claims nothing
    ]
    fold = timeline(events)
    assert kinds(fold, "a") == [("paid", 0.0, 2.0)]
    assert kinds(fold, "b") == [("hidden", 3.0, 5.0)]


def test_a_load_no_phase_waited_for_stays_a_plain_load_and_a_cancelled_one_failed() -> None:
    events = [
        *load("a", 0.0, 1.0, speculative=False),  # an explicit load (POST /ui/load)
        ModelLoadStarted(t=2.0, model="b", speculative=True, estimate_bytes=100),
        ModelLoadCancelled(t=3.0, model="b", reason="room for an urgent load"),
    ]
    fold = timeline(events)
    assert kinds(fold, "a") == [("load", 0.0, 1.0)]
    (cancelled,) = [b for b in fold.bars.values() if b.lane == "b"]
    assert (cancelled.kind, cancelled.outcome) == ("failed", "room for an urgent load")


def test_a_load_in_flight_carries_the_last_load_time_for_its_progress() -> None:
    fold = timeline([*load("a", 0.0, 2.5, speculative=False)])
    (changed,) = fold.feed(ModelLoadStarted(t=9.0, model="a", speculative=False, estimate_bytes=7))
    assert (changed.kind, changed.end, changed.expect_s) == ("loading", None, 2.5)
    assert fold.estimate_bytes["a"] == 7


def test_evictions_kv_restores_and_requests_are_bars_on_the_models_lane() -> None:
    stats = GenerationStats(
        prompt_tokens=10,
        prefill_tokens=4,
        kv_restored_tokens=6,
        prefill_s=0.1,
        ttft_s=0.2,
        tokens=5,
        gen_s=2.0,
        stop_reason="stop",
    )
    fold = Timeline()
    events: list[AnyEvent] = [
        PhaseStarted(t=1.0, task_id="t1", phase_id="p1", model="a", phase="chat"),
        KVHit(t=1.1, model="a", tokens=6),
        FirstToken(t=1.2, phase_id="p1", model="a", ttft_s=0.2),
        GenerationProgress(t=2.2, phase_id="p1", model="a", tokens=3),
        GenerationFinished(t=3.2, phase_id="p1", model="a", stats=stats),
        PhaseFinished(t=3.3, phase_id="p1", model="a", outcome="ok"),
        PhaseStarted(t=4.0, task_id="t1", phase_id="p2", phase="grade"),
        ModelEvictStarted(t=5.0, model="a", reason="room for b"),
        ModelEvicted(t=5.5, model="a", evict_s=0.5, reason="room for b"),
    ]
    changed = [fold.feed(ev) for ev in events]
    assert [len(c) for c in changed] == [1, 1, 0, 1, 1, 1, 1, 1, 1]
    request = fold.bars["req-p1"]
    assert (request.start, request.end, request.tokens, request.tok_s) == (1.0, 3.3, 5, 2.0)
    assert changed[3][0].tok_s == 2.0  # live: 2 tokens after the first in one second
    assert kinds(fold, "a") == [("request", 1.0, 3.3), ("kv", 1.1, 1.1), ("evict", 5.0, 5.5)]
    assert fold.bars["req-p2"].lane == GRADER_LANE and fold.bars["req-p2"].end is None
    assert lanes(fold.bars.values()) == ["a", GRADER_LANE]
    fold.feed(KVRestoreFailed(t=6.0, model="a", tokens=6, reason="bad state"))
    assert [b.kind for b in fold.bars.values() if b.lane == "a"][1] == "failed"


def test_prune_keeps_the_window_and_open_bars_only() -> None:
    fold = timeline(
        [
            *load("a", 0.0, 1.0, speculative=False),
            *load("b", 50.0, 51.0, speculative=False),
            PhaseStarted(t=2.0, task_id="t", phase_id="open", model="a", phase="chat"),
        ]
    )
    fold.prune(before=10.0, keep=100)
    assert sorted((b.lane, b.kind) for b in fold.bars.values()) == [("a", "request"), ("b", "load")]
    fold.prune(before=0.0, keep=1)  # over the count: the oldest finished bars go first
    assert [b.kind for b in fold.bars.values()] == ["request"]


def test_pack_puts_overlapping_bars_on_rows_of_their_own() -> None:
    bars = [
        Bar(id="1", lane="a", kind="request", start=0.0, end=2.0),
        Bar(id="2", lane="a", kind="request", start=1.0, end=None),  # open: ends now
        Bar(id="3", lane="a", kind="request", start=2.0, end=3.0),
        Bar(id="4", lane="a", kind="request", start=2.5, end=4.0),
    ]
    assert [(b.id, row) for b, row in pack(bars, now=5.0)] == [
        ("1", 0),
        ("2", 1),
        ("3", 0),
        ("4", 2),
    ]
