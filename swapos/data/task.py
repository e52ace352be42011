"""The task format (docs/tasks.md) as data: one coding task, loaded into memory."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

Category = Literal["bugfix", "feature", "refactor", "completion"]


class TaskMeta(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``meta.json`` of a task: a non-empty ``task_id`` without path separators, a category,
    a difficulty from 1 (easiest) to 10, and a description."""

    task_id: Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[^/\\]+$")]
    category: Category
    difficulty: Annotated[int, msgspec.Meta(ge=1, le=10)] = 2
    description: str = ""


class Task(msgspec.Struct, frozen=True, kw_only=True):
    """A task, fully read.

    Attributes:
        meta: the task's ``meta.json``.
        root: the task folder ("" for tasks that do not come from a folder, e.g. HumanEval).
        problem: the brief shown to the model (``problem.md``).
        starter: the starting ``solution.py``; the model's answer replaces it whole
            (for ``completion`` tasks, the prompt the model continues).
        tests: test file name -> source; never shown to the model.
        reference: the reference ``solution.py``, if shipped; never shown to the model.
        entry_point: for ``completion`` tasks, the function the tests call.
    """

    meta: TaskMeta
    root: str
    problem: str
    starter: str
    tests: dict[str, str]
    reference: str | None = None
    entry_point: str | None = None

    @property
    def task_id(self) -> str:
        return self.meta.task_id

    @property
    def category(self) -> Category:
        return self.meta.category
