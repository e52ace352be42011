"""``bench splice``: reruns of some tasks laid over a full suite run, on small results files."""

from __future__ import annotations

from pathlib import Path

import pytest

from swapos.bench.cli import main as bench_main
from swapos.bench.results import write_summary
from swapos.bench.splice import first_difference, splice, splice_report
from swapos.errors import SwapOSError
from swapos.records.schema import PhaseRecord, RunInfo, TaskResult
from swapos.records.summary import summarize


def result(task_id: str, passed: bool, *, attempt: int = 1, wall: float = 1.0) -> TaskResult:
    """A task that passed at ``attempt`` (or failed after it), with one code phase per attempt."""
    phases = [
        PhaseRecord(task_id=task_id, phase_id=f"{task_id}-{a}", phase="code", attempt=a, tokens=a)
        for a in range(1, attempt + 1)
    ]
    return TaskResult(
        task_id=task_id,
        passed=passed,
        pass_at_1=passed and attempt == 1,
        passed_attempt=attempt if passed else 0,
        wall_clock_s=wall,
        phases=phases,
    )


def write_run(out: Path, arm: str, results: list[TaskResult]) -> None:
    write_summary(out / f"overlap-{arm}" / "results.json", summarize(results, RunInfo()))


def test_a_rerun_replaces_its_tasks_in_the_full_runs_order() -> None:
    base = [result("t1", False), result("t2", True), result("t3", False)]
    spliced = splice(base, [result("t3", True, attempt=2), result("t1", False, wall=9.0)])
    assert [r.task_id for r in spliced] == ["t1", "t2", "t3"]
    assert [r.passed for r in spliced] == [False, True, True]
    assert spliced[0].wall_clock_s == 9.0


def test_a_rerun_of_a_task_not_in_the_full_run_is_refused() -> None:
    with pytest.raises(SwapOSError, match="not in the full run: t9"):
        splice([result("t1", True)], [result("t9", True)])


def test_the_first_differing_phase_is_named_by_attempt() -> None:
    one, two = result("t", False, attempt=1), result("t", True, attempt=2)
    assert first_difference(one, one) == "none"
    assert first_difference(one, two) == "the end"
    changed = result("t", True, attempt=2)
    changed.phases[1].tokens = 99
    assert first_difference(two, changed) == "attempt 2 code"


def test_the_report_counts_each_splice_against_the_single_arm() -> None:
    full = summarize(
        [result("t1", False), result("t2", True), result("t3", False), result("t4", True)],
        RunInfo(),
    )
    single = summarize(
        [result("t1", False), result("t2", False), result("t3", False), result("t4", True)],
        RunInfo(),
    )
    first = summarize([result("t1", True, attempt=2), result("t3", False)], RunInfo())
    second = summarize([result("t3", True)], RunInfo())
    lines = splice_report("full", full, single, [("r1", first), ("r2", second)])
    assert lines[0].startswith("full: passed 2/4 (50.0%), pass@1 2,")
    assert "McNemar vs single: 1-0" in lines[1]
    assert "  t1: before fail (attempt 0), now pass (attempt 2)" in lines[4]
    assert "newly passed: t1 | newly failed: -" in lines[6]
    assert lines[7].startswith("  spliced with r1: passed 3/4 (75.0%), pass@1 2,")
    assert "retry rescue 1/2 (50.0%)" in lines[7]
    assert lines[-2].startswith("  spliced with r2: passed 4/4 (100.0%), pass@1 3,")
    assert "McNemar vs single: 3-0" in lines[-1]
    assert "first graded candidate vs single: 2 better, 0 worse" in lines[-1]


def test_bench_splice_reads_the_run_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full, rerun, single = tmp_path / "full", tmp_path / "rerun", tmp_path / "single"
    write_run(full, "pipeline", [result("t1", False), result("t2", True)])
    write_run(full, "single", [result("t1", False), result("t2", True)])
    write_run(rerun, "pipeline", [result("t1", True, attempt=3)])
    write_run(single, "single", [result("t1", False), result("t2", False)])
    assert bench_main(["splice", str(full), str(rerun)]) == 0
    out = capsys.readouterr().out
    assert "spliced with rerun: passed 2/2 (100.0%)" in out
    assert "McNemar vs single: 1-0" in out.splitlines()[-1]
    assert bench_main(["splice", str(full), str(rerun), "--single", str(single)]) == 0
    assert "McNemar vs single: 2-0" in capsys.readouterr().out.splitlines()[-1]


def test_bench_splice_says_which_results_file_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path / "full", "pipeline", [result("t1", True)])
    assert bench_main(["splice", str(tmp_path / "full"), str(tmp_path / "none")]) == 2
    assert "none/overlap-pipeline/results.json" in capsys.readouterr().err
    given = ["splice", str(tmp_path / "full"), str(tmp_path / "full"), "--single"]
    assert bench_main([*given, str(tmp_path / "none")]) == 2
    assert "overlap-single/results.json" in capsys.readouterr().err


def test_two_runs_of_one_arm_are_compared_task_by_task_without_a_paired_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    write_run(before, "pipeline", [result("t1", True), result("t2", False, attempt=2)])
    write_run(after, "pipeline", [result("t1", True), result("t2", True, attempt=3)])
    assert bench_main(["splice", str(before), str(after)]) == 0
    out = capsys.readouterr().out
    assert "t1: before pass (attempt 1), now pass (attempt 1); first differing phase: none" in out
    assert (
        "t2: before fail (attempt 0), now pass (attempt 3); first differing phase: the end" in out
    )
    assert "McNemar" not in out
