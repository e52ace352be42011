"""A run summary is its RunInfo plus aggregates recomputed from its tasks."""

from __future__ import annotations

import msgspec

from swapos.records.schema import PhaseRecord, RunInfo, RunSummary, TaskResult
from swapos.records.summary import info_of, peak_rss_text, summarize


def _task(tid: str, *, passed: bool, load_s: float, hidden_s: float) -> TaskResult:
    phase = PhaseRecord(
        task_id=tid, phase_id=f"{tid}-p", phase="code", model="m", load_s=load_s,
        load_hidden_s=hidden_s,
    )  # fmt: skip
    return TaskResult(task_id=tid, passed=passed, pass_at_1=passed, phases=[phase])


def test_info_of_a_summary_keeps_header_and_counters_and_nothing_else() -> None:
    summary = RunSummary(
        run_at="2026-01-01", mode="lru", models=["a"], host={"cpus": "2"}, loads=3,
        kv_hits=2, wall_clock_s=9.5, tasks_total=7, pass_rate=0.5,
    )  # fmt: skip
    info = info_of(summary)
    assert type(info) is RunInfo
    assert msgspec.structs.asdict(info) == {
        "run_at": "2026-01-01", "mode": "lru", "profile": "", "models": ["a"],
        "budget_bytes": 0, "overhead_bytes": 0, "host": {"cpus": "2"}, "wall_clock_s": 9.5,
        "loads": 3,
        "evictions": 0, "kv_hits": 2, "kv_misses": 0, "kv_saves": 0, "kv_yielded": 0,
    }  # fmt: skip
    info.models.append("b")
    info.host["cpus"] = "4"
    assert summary.models == ["a"] and summary.host == {"cpus": "2"}  # a copy


def test_summarize_recomputes_every_aggregate_whatever_the_info_holds() -> None:
    stale = RunSummary(mode="overlap", loads=4, tasks_total=99, pass_rate=0.0)
    tasks = [
        _task("t1", passed=True, load_s=1.0, hidden_s=3.0),
        _task("t2", passed=False, load_s=1.0, hidden_s=0.0),
    ]
    summary = summarize(tasks, stale)
    assert (summary.mode, summary.loads) == ("overlap", 4)
    assert (summary.tasks_total, summary.tasks_passed, summary.pass_rate) == (2, 1, 0.5)
    assert summary.load_hidden_fraction == 0.6  # 3 hidden of 5 s
    assert summarize(summary.results, info_of(summary)) == summary


def test_the_peak_rss_is_said_against_a_finite_budget_only() -> None:
    text = peak_rss_text(1545 << 20, 1536 << 20, places=3, note="; fixed overhead 63 MiB")
    assert text == "peak RSS 1545 MiB of 1536 MiB budget (1.006x; fixed overhead 63 MiB)"
    assert peak_rss_text(1545 << 20, 0) == "" == peak_rss_text(1545 << 20, 2**62)


def test_the_wall_of_tasks_that_fail_is_reported_apart() -> None:
    from swapos.records.schema import RunInfo, TaskResult
    from swapos.records.summary import summarize

    results = [
        TaskResult(task_id="a", passed=True, wall_clock_s=10.0),
        TaskResult(task_id="b", passed=False, wall_clock_s=30.0),
        TaskResult(task_id="c", passed=False, wall_clock_s=50.0),
    ]
    s = summarize(results, RunInfo())
    assert (s.mean_wall_passed_s, s.mean_wall_failed_s) == (10.0, 40.0)
    assert s.failed_wall_share == 80.0 / 90.0
    none = summarize([], RunInfo())
    assert (none.mean_wall_failed_s, none.failed_wall_share) == (0.0, 0.0)
