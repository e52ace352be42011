"""Check a suite: every task RED on its starter and GREEN on its reference.

``python -m swapos.pipeline.validate [SUITE]`` (default ``builtin``) prints one row per task
and exits 1 if any task is invalid, 2 if the suite cannot be loaded. A refactor task must also
carry structural tests (at least one test whose name contains ``structure``), since behaviour
tests alone pass on the unrefactored starter.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import msgspec

from swapos.data.task import Task
from swapos.errors import TaskError
from swapos.grader import GradeResult, grade
from swapos.pipeline.tasks import load_suite


class TaskCheck(msgspec.Struct, frozen=True, kw_only=True):
    """The validation of one task.

    Attributes:
        task_id: the task.
        category: its category.
        starter: grading of the starter (must not pass), None if not run.
        reference: grading of the reference (must pass), None if there is none.
        problems: what is wrong; empty when the task is valid.
    """

    task_id: str
    category: str
    starter: GradeResult | None
    reference: GradeResult | None
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def validate_task(task: Task, *, timeout_s: float = 30.0) -> TaskCheck:
    """Grade ``task``'s starter and reference and list what breaks the task contract."""
    problems: list[str] = []
    if task.category == "refactor" and not _has_structure_test(task):
        problems.append("refactor task has no structural test (a test named *structure*)")
    starter = grade(task, task.starter, timeout_s=timeout_s)
    if starter.passed:
        problems.append("starter already passes the tests (task must be RED on its starter)")
    reference = None
    if task.reference is None:
        problems.append("no reference/solution.py")
    else:
        reference = grade(task, task.reference, timeout_s=timeout_s)
        if not reference.passed:
            problems.append(f"reference does not pass: {reference.outcome}: {reference.reason}")
    return TaskCheck(
        task_id=task.task_id,
        category=task.category,
        starter=starter,
        reference=reference,
        problems=problems,
    )


def validate_suite(
    tasks: Sequence[Task], *, timeout_s: float = 30.0, jobs: int = 4
) -> list[TaskCheck]:
    """Validate every task (``jobs`` at a time), in the order given."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(lambda t: validate_task(t, timeout_s=timeout_s), tasks))


def format_table(checks: Sequence[TaskCheck]) -> str:
    """A plain-text table: task, category, starter outcome, reference outcome, verdict."""
    rows = [("task", "category", "starter", "reference", "verdict")]
    for c in checks:
        rows.append(
            (
                c.task_id,
                c.category,
                _cell(c.starter),
                _cell(c.reference),
                "ok" if c.ok else "INVALID: " + "; ".join(c.problems),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(r[:4], widths, strict=True)) + "  " + r[4]
        for r in rows
    ]
    bad = sum(not c.ok for c in checks)
    lines.append(f"{len(checks) - bad}/{len(checks)} tasks valid")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m swapos.pipeline.validate``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m swapos.pipeline.validate", description=__doc__)
    parser.add_argument(
        "suite",
        nargs="?",
        default="builtin",
        help="'builtin', 'humaneval', 'issues' or a folder of tasks (default: builtin)",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per grading")
    parser.add_argument("--jobs", type=int, default=4, help="gradings run in parallel")
    parser.add_argument("--limit", type=int, default=None, help="validate the first N tasks")
    args = parser.parse_args(argv)
    try:
        tasks = load_suite(args.suite, limit=args.limit)
    except TaskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    checks = validate_suite(tasks, timeout_s=args.timeout, jobs=args.jobs)
    print(format_table(checks))
    return 0 if all(c.ok for c in checks) else 1


def _has_structure_test(task: Task) -> bool:
    for source in task.tests.values():
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.FunctionDef)
                and node.name.startswith("test")
                and "structure" in node.name
            ):
                return True
    return False


def _cell(result: GradeResult | None) -> str:
    if result is None:
        return "-"
    return f"{result.outcome} {result.tests_passed}/{result.tests_total}"


if __name__ == "__main__":
    sys.exit(main())
