"""Builders for systems on the fake backend (deterministic, virtual time)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from swapos.actors.system import System, open_system
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.data.task import Task, TaskMeta
from swapos.models.profile import ModelConfig, PipelineConfig, Profile
from swapos.models.spec import ModelSpec
from swapos.testing import FakeClock

PLAIN: dict[str, Any] = {
    "skip_reason_max_difficulty": 0,
    "resamples": 2,
    "draws": 0,
    "second_opinion": False,
    "task_seconds": 0.0,
    "draw_seconds": 0.0,
}
"""The ``[pipeline]`` settings the fake-model tests are written for, where they differ from
the default profile's: every task plans, a repeat is resampled twice, no draws, no second
opinion, no spend limits (their scripted tokens take seconds of the fake clock)."""


def fake_profile(names: list[str]) -> Profile:
    return Profile(
        name="fake",
        budget=1000,
        models={n: ModelConfig(path=f"/nonexistent/{n}.gguf") for n in names},
    )


def pipeline_profile() -> Profile:
    """Three fake models, two in the pipeline's roles (planner, coder; the ``critic`` is a
    model no role names), two attempts."""
    names = ["planner", "coder", "critic"]
    return Profile(
        name="fake",
        budget=1000,
        models={n: ModelConfig(path=f"/nonexistent/{n}.gguf", n_ctx=4096) for n in names},
        roles={"reason": "planner", "code": "coder"},
        pipeline=PipelineConfig(**{**PLAIN, "max_attempts": 2}),
    )


ADD_TASK = Task(
    meta=TaskMeta(task_id="add", category="bugfix"),
    root="",
    problem="`add(a, b)` returns a + b.",
    starter="def add(a, b):\n    return a - b\n",
    tests={
        "test_add.py": "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    },
)
"""A one-line bugfix graded for real (its starter fails its test)."""

DOCTEST_TASK = Task(
    meta=TaskMeta(task_id="HumanEval_add", category="completion", difficulty=2),
    root="",
    problem="Complete the function.",
    starter='def add(a, b):\n    """Add.\n    >>> add(2, 3)\n    5\n    """\n',
    tests={
        "test_add.py": "from solution import add\n\n\ndef test_add():\n    assert add(1, 1) == 2\n"
    },
    entry_point="add",
)
"""A completion task whose docstring example a self-check can run (its tests are hidden)."""


def coder_only_profile() -> Profile:
    """One fake coder, one attempt, no plan: a task is code then grade."""
    return Profile(
        name="fake",
        budget=1000,
        models={"coder": ModelConfig(path="/nonexistent/coder.gguf", n_ctx=8192)},
        roles={"code": "coder"},
        pipeline=PipelineConfig(**{**PLAIN, "max_attempts": 1, "skip_reason_max_difficulty": 9}),
    )


@asynccontextmanager
async def fake_system(
    scripts: dict[str, FakeModelScript],
    *,
    budget: int,
    clock: FakeClock,
    profile: Profile | None = None,
    contention: float = 0.0,
    slots: int = 1,
    specs: dict[str, ModelSpec] | None = None,
    **kwargs: Any,
) -> AsyncIterator[tuple[System, FakeBackend]]:
    backend = FakeBackend(clock, scripts, contention=contention)
    specs = specs or {
        n: ModelSpec(name=n, path=f"/nonexistent/{n}.gguf", slots=slots) for n in scripts
    }
    async with open_system(
        profile or fake_profile(list(scripts)),
        backend=backend,
        specs=specs,
        clock=clock,
        budget_bytes=budget,
        **kwargs,
    ) as system:
        yield system, backend
