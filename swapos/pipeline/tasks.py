"""Loading tasks and suites (docs/tasks.md): task folders, the builtin suite, HumanEval.

A task folder holds ``meta.json``, ``problem.md``, ``starter/solution.py``, ``tests/test_*.py``
and optionally ``reference/solution.py``. A suite is any folder of task folders, at any depth.
Every problem is a :class:`~swapos.errors.TaskError` naming the file and what to do.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from importlib import resources
from pathlib import Path

import msgspec

from swapos.data.task import Task, TaskMeta
from swapos.errors import TaskError
from swapos.pipeline.humaneval import load_humaneval

DEFAULT_TASK_ID = "bugfix_sum_range"
"""The builtin task ``python -m swapos.run`` uses when none is named (an easy bugfix)."""

_META_HELP = (
    'expected {"task_id": str, "category": "bugfix"|"feature"|"refactor"|"completion", '
    '"difficulty": int, "description": str}'
)


SHIPPED_SUITES = ("issues",)
"""Suites shipped beside the builtin one, under ``swapos/suites/<name>``: ``issues`` is
written to other conventions than ours (briefs shaped like real issues and READMEs)."""


def builtin_suite_path() -> Path:
    """The folder of the suite shipped with SwapOS (``swapos/tasks``)."""
    return Path(str(resources.files("swapos") / "tasks"))


def shipped_suite_path(name: str) -> Path:
    """The folder of the shipped suite ``name`` (one of :data:`SHIPPED_SUITES`)."""
    return Path(str(resources.files("swapos") / "suites" / name))


def load_task(path: str | os.PathLike[str]) -> Task:
    """Read one task folder.

    Raises:
        TaskError: a required file is missing or unreadable, or ``meta.json`` is malformed
            (the message names the file and the offending field).
    """
    root = Path(path)
    meta_path = root / "meta.json"
    try:
        meta = msgspec.json.decode(_read(meta_path, "the task's metadata").encode(), type=TaskMeta)
    except msgspec.ValidationError as e:
        raise TaskError(f"{meta_path}: {e}; {_META_HELP}") from e
    except msgspec.DecodeError as e:
        raise TaskError(f"{meta_path}: not valid JSON ({e}); {_META_HELP}") from e
    tests = {
        p.name: _read(p, "a test file")
        for p in sorted((root / "tests").glob("test_*.py"))
        if p.is_file()
    }
    if not tests:
        raise TaskError(
            f"{root / 'tests'}: no test_*.py files; add the grader's pytest tests there"
        )
    ref_path = root / "reference" / "solution.py"
    return Task(
        meta=meta,
        root=str(root.resolve()),
        problem=_read(root / "problem.md", "the brief shown to the model"),
        starter=_read(root / "starter" / "solution.py", "the starting code"),
        tests=tests,
        reference=_read(ref_path, "the reference answer") if ref_path.exists() else None,
    )


def discover_tasks(suite_path: str | os.PathLike[str]) -> list[Task]:
    """Every task under ``suite_path`` (a folder with ``meta.json`` is a task), sorted by id.

    Hidden folders and ``__pycache__`` are skipped; folders inside a task are not searched.

    Raises:
        TaskError: the folder does not exist, a task is malformed, or two tasks share an id.
    """
    suite = Path(suite_path)
    if not suite.is_dir():
        raise TaskError(f"{suite}: not a folder; give a folder of task folders (docs/tasks.md)")
    tasks: dict[str, Task] = {}
    for folder in _task_folders(suite):
        task = load_task(folder)
        if task.task_id in tasks:
            raise TaskError(
                f"duplicate task_id {task.task_id!r} in {tasks[task.task_id].root}/meta.json "
                f"and {folder / 'meta.json'}; task ids must be unique within a suite"
            )
        tasks[task.task_id] = task
    return [tasks[k] for k in sorted(tasks)]


def load_suite(
    spec: str,
    *,
    limit: int | None = None,
    task_ids: Collection[str] | None = None,
    categories: Collection[str] | None = None,
) -> list[Task]:
    """Load a suite: ``"builtin"``, ``"humaneval"``, a suite folder or a single task folder.

    Args:
        spec: which suite.
        limit: keep at most this many tasks (after the other filters, in id order).
        task_ids: keep only these tasks; an id not in the suite is an error.
        categories: keep only tasks of these categories.

    Raises:
        TaskError: the suite cannot be read, names unknown ids, or ends up empty.
    """
    tasks = _load_spec(spec)
    if task_ids is not None:
        known = {t.task_id for t in tasks}
        missing = sorted(set(task_ids) - known)
        if missing:
            raise TaskError(
                f"suite {spec!r} has no task {', '.join(map(repr, missing))}; "
                f"known ids start with {', '.join(sorted(known)[:5])}"
            )
        tasks = [t for t in tasks if t.task_id in set(task_ids)]
    if categories is not None:
        tasks = [t for t in tasks if t.category in set(categories)]
    if limit is not None:
        tasks = tasks[: max(0, limit)]
    if not tasks:
        raise TaskError(
            f"suite {spec!r} has no tasks (after filters: limit={limit}, task_ids={task_ids}, "
            f"categories={categories}); use 'builtin', 'humaneval', or a folder containing "
            "task folders with meta.json, and check the filters"
        )
    return tasks


def _load_spec(spec: str) -> list[Task]:
    if spec == "builtin":
        return discover_tasks(builtin_suite_path())
    if spec == "humaneval":
        return load_humaneval()
    if spec in SHIPPED_SUITES:
        return discover_tasks(shipped_suite_path(spec))
    path = Path(spec).expanduser()
    if not path.exists():
        raise TaskError(
            f"suite {spec!r}: no such folder; use 'builtin', 'humaneval', "
            f"{', '.join(map(repr, SHIPPED_SUITES))} or a path"
        )
    if (path / "meta.json").is_file():
        return [load_task(path)]
    return discover_tasks(path)


def _task_folders(suite: Path) -> Iterable[Path]:
    for dirpath, dirnames, filenames in os.walk(suite):
        if "meta.json" in filenames:
            dirnames.clear()
            yield Path(dirpath)
        else:
            dirnames[:] = sorted(
                d for d in dirnames if not d.startswith(".") and d != "__pycache__"
            )


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskError(
            f"{path}: missing ({what}); every task folder needs it (docs/tasks.md)"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(
            f"{path}: cannot read {what} ({e}); fix the file's permissions or encoding"
        ) from e
