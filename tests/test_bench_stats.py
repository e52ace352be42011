"""Paired statistics of the suite benchmark: exact McNemar, bootstrap, ratios, comparison."""

from __future__ import annotations

import math

import pytest

from swapos.bench.compare import compare
from swapos.bench.stats import bootstrap_ci, mcnemar, mcnemar_exact, ratio_stats
from swapos.records.schema import PhaseRecord, RunSummary, TaskResult


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (0, 5, 0.0625),
        (5, 0, 0.0625),
        (0, 0, 1.0),
        (3, 3, 1.0),
        (7, 7, 1.0),
        (1, 9, 22 / 1024),  # 2 * (C(10,0) + C(10,1)) / 2**10
        (0, 1, 1.0),
        (2, 8, 2 * (1 + 10 + 45) / 1024),
    ],
)
def test_exact_mcnemar_matches_known_values(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(p)


def test_exact_mcnemar_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        mcnemar_exact(-1, 2)


def test_mcnemar_pairs_only_shared_tasks() -> None:
    a = {"t1": True, "t2": True, "t3": False, "t4": False, "only_a": True}
    b = {"t1": True, "t2": False, "t3": True, "t4": False, "only_b": False}
    result = mcnemar("a", a, "b", b)
    assert (result.n, result.both_pass, result.only_a, result.only_b, result.both_fail) == (
        4,
        1,
        1,
        1,
        1,
    )
    assert result.p_value == 1.0


def test_bootstrap_is_seeded_and_brackets_the_median() -> None:
    values = [1.0, 1.2, 0.9, 1.5, 1.1, 1.3, 0.8, 1.05]
    lo, hi = bootstrap_ci(values, seed=7)
    assert (lo, hi) == bootstrap_ci(values, seed=7)
    assert lo is not None and hi is not None
    assert min(values) <= lo <= 1.075 <= hi <= max(values)
    assert bootstrap_ci([]) == (None, None)
    assert bootstrap_ci([2.0]) == (2.0, 2.0)


def test_ratio_stats_pairs_by_task_and_reports_ratio_of_totals() -> None:
    num = {"a": 2.0, "b": 3.0, "c": 10.0, "extra": 1.0}
    den = {"a": 1.0, "b": 2.0, "c": 10.0, "zero": 0.0}
    r = ratio_stats(num, den)
    assert r.n == 3
    assert r.median == 1.5
    assert r.ratio_of_totals == pytest.approx(15 / 13)
    assert r.ci_low is not None and r.ci_high is not None and r.ci_low <= 1.5 <= r.ci_high
    empty = ratio_stats({}, {})
    assert empty.n == 0 and empty.median is None and empty.ratio_of_totals is None


def summary(mode: str, walls: dict[str, float], passed: set[str], hidden: float) -> RunSummary:
    results = [
        TaskResult(
            task_id=t,
            passed=t in passed,
            wall_clock_s=w,
            phases=[
                PhaseRecord(
                    task_id=t,
                    phase_id=f"{t}-p",
                    phase="code",
                    model="m",
                    load_s=1.0,
                    load_hidden_s=hidden,
                )
            ],
        )
        for t, w in walls.items()
    ]
    return RunSummary(
        mode=mode,
        results=results,
        total_load_s=float(len(walls)),
        total_load_hidden_s=hidden * len(walls),
    )


def test_comparison_holds_ratios_hidden_fractions_and_paired_tests() -> None:
    walls = {"t1": 10.0, "t2": 20.0}
    c = compare(
        {
            ("resident", "pipeline"): summary("resident", walls, {"t1"}, 0.0),
            ("overlap", "pipeline"): summary(
                "overlap", {t: 1.5 * w for t, w in walls.items()}, {"t1", "t2"}, 1.0
            ),
            ("sequential", "pipeline"): summary(
                "sequential", {t: 2 * w for t, w in walls.items()}, {"t1"}, 0.0
            ),
            ("overlap", "single"): summary("overlap", walls, set(), 0.0),
        }
    )
    ratios = c.wall_ratios["pipeline"]
    assert ratios["overlap/resident"].median == pytest.approx(1.5)
    assert ratios["sequential/resident"].ratio_of_totals == pytest.approx(2.0)
    assert ratios["overlap/sequential"].median == pytest.approx(0.75)
    assert "single" not in c.wall_ratios  # only one mode ran the single arm
    # overlap: hidden 2 of (2 + 2 paid) in pipeline, 0 of 2 paid in single
    assert c.hidden_load_fraction == {
        "overlap": pytest.approx(1 / 3),
        "sequential": 0.0,
        "resident": 0.0,
    }
    assert list(c.arms) == [
        "overlap-pipeline",
        "overlap-single",
        "sequential-pipeline",
        "resident-pipeline",
    ]
    (arms,) = c.mcnemar_arms
    assert (arms.a, arms.b, arms.only_a, arms.only_b) == (
        "overlap-pipeline",
        "overlap-single",
        2,
        0,
    )
    assert arms.p_value == pytest.approx(0.5)
    assert len(c.mcnemar_modes) == 3
    assert not math.isnan(c.mcnemar_modes[0].p_value)


def test_phases_at_the_same_time_count_their_common_time_once() -> None:
    from swapos.bench.compare import breakdown, union_length
    from swapos.records.schema import PhaseRecord, RunInfo, TaskResult
    from swapos.records.summary import summarize

    assert union_length([(0, 2), (1, 3), (5, 6), (4, 4)]) == 4
    code = PhaseRecord(task_id="t", phase_id="a", phase="code", started_t=0.0, total_s=4.0,
                       prefill_s=1.0, gen_s=3.0)  # fmt: skip
    draws = [  # two draws side by side over the same 10 s, and one after them
        PhaseRecord(
            task_id="t",
            phase_id=f"d{i}",
            phase="code",
            started_t=4.0 + 10 * (i // 2),
            total_s=10.0,
            gen_s=10.0,
        )
        for i in range(3)
    ]
    check = PhaseRecord(task_id="t", phase_id="c", phase="selfcheck", started_t=24.0, total_s=1.0)
    task = TaskResult(task_id="t", wall_clock_s=26.0, phases=[code, *draws, check])
    parts = breakdown(summarize([task], RunInfo()))
    assert (parts["prefill"], parts["decode"], parts["grade"]) == (1.0, 23.0, 1.0)
    assert parts["other"] == 1.0  # 26 s of wall, 25 s of it in the parts
