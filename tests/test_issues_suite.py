"""The shipped ``issues`` suite: repository tasks written to other conventions than ours."""

from __future__ import annotations

import ast
import sys
from collections import Counter

import pytest

from swapos.data.task import Task
from swapos.pipeline.tasks import SHIPPED_SUITES, load_suite
from swapos.pipeline.validate import validate_suite

ALLOWED_IMPORTS = {"pytest", "solution"}


@pytest.fixture(scope="module")
def issues() -> list[Task]:
    return load_suite("issues")


def test_the_issues_suite_loads_by_name_and_mixes_categories(issues: list[Task]) -> None:
    assert "issues" in SHIPPED_SUITES
    assert len(issues) >= 20
    counts = Counter(t.category for t in issues)
    assert set(counts) == {"bugfix", "feature", "refactor"}
    assert min(counts.values()) >= 6
    assert {t.meta.difficulty for t in issues} == {1, 2, 3}


def test_it_is_not_part_of_the_builtin_suite(issues: list[Task]) -> None:
    builtin = {t.task_id for t in load_suite("builtin")}
    assert not builtin & {t.task_id for t in issues}


def test_starters_are_realistic_modules_of_30_to_120_lines(issues: list[Task]) -> None:
    sizes = {t.task_id: len(t.starter.splitlines()) for t in issues}
    assert {k: n for k, n in sizes.items() if not 30 <= n <= 120} == {}


def test_tests_use_only_the_standard_library_and_pytest(issues: list[Task]) -> None:
    stdlib = set(sys.stdlib_module_names)
    bad = {}
    for t in issues:
        for name, source in t.tests.items():
            for node in ast.walk(ast.parse(source)):
                mods = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                for mod in mods:
                    top = mod.split(".")[0]
                    if top not in stdlib and top not in ALLOWED_IMPORTS:
                        bad[f"{t.task_id}/{name}"] = mod
    assert bad == {}


def test_refactors_are_judged_by_structure_tests(issues: list[Task]) -> None:
    for t in issues:
        if t.category == "refactor":
            names = [n for src in t.tests.values() for n in _test_names(src)]
            assert any("structure" in n for n in names), t.task_id
            assert any("structure" not in n for n in names), t.task_id


def _test_names(source: str) -> list[str]:
    return [
        n.name
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.FunctionDef) and n.name.startswith("test")
    ]


@pytest.mark.slow
def test_every_issues_task_is_red_on_its_starter_and_green_on_its_reference(
    issues: list[Task],
) -> None:
    checks = validate_suite(issues, jobs=2)
    assert [(c.task_id, c.problems) for c in checks if not c.ok] == []
