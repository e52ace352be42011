"""``python -m swapos.bench grade``: the grader's cost per grade over the builtin references."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swapos.bench.cli import main as bench_main
from swapos.pipeline import tasks as tasks_module
from swapos.pipeline.tasks import builtin_suite_path, load_task


def test_grade_bench_reports_the_median_of_every_reference_grade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = load_task(builtin_suite_path() / "bugfix_sum_range")
    monkeypatch.setattr(tasks_module, "load_suite", lambda spec, **_: [one])
    out = tmp_path / "cost.json"
    assert bench_main(["grade", "--rounds", "2", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["tasks"] == 1 and report["grades"] == 2 and report["not_passed"] == []
    assert report["min_s"] <= report["median_s"] <= max(report["durations_s"])
    assert len(report["durations_s"]) == 2 and all(d > 0 for d in report["durations_s"])


def test_grade_bench_fails_when_a_reference_is_not_graded_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = load_task(builtin_suite_path() / "bugfix_sum_range")
    broken = type(one)(
        meta=one.meta, root=one.root, problem=one.problem, starter=one.starter,
        tests=one.tests, reference=one.starter,
    )  # fmt: skip
    monkeypatch.setattr(tasks_module, "load_suite", lambda spec, **_: [broken])
    assert bench_main(["grade", "--rounds", "1"]) == 1
