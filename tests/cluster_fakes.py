"""Fake-backend pieces for the Ray tests, importable by Ray's worker processes.

Ray pickles a worker's system factory by reference, so it lives in a module every worker
can import (the tests put the repository on the workers' ``PYTHONPATH``).
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from swapos.actors.system import System, TaskOutcome
from swapos.backends.fake_script import FakeModelScript
from swapos.data.task import Task, TaskMeta
from swapos.errors import ModelFileError
from swapos.models.profile import Mode, Profile
from swapos.records.schema import RunSummary
from swapos.sysinfo import NODE_ENV
from swapos.testing import FakeClock
from tests.fakes import fake_system

ROOT = str(Path(__file__).resolve().parent.parent)
RAY_OPTIONS: dict[str, Any] = {"runtime_env": {"env_vars": {"PYTHONPATH": ROOT}}}
"""Actor options that let Ray's workers import ``tests``."""

GOOD = "def add(a, b):\n    return a + b\n```"
SCRIPTS = {
    "planner": FakeModelScript(load_s=1.0, token_s=0.01, reply="Return a plus b.\n\n"),
    "coder": FakeModelScript(load_s=1.0, token_s=0.01, reply=GOOD),
    "critic": FakeModelScript(load_s=1.0, token_s=0.01, reply="fine\n\n"),
}


def task(i: int) -> Task:
    """Task ``add<i>``: every third one expects the wrong sum, so the fake coder's answer
    fails it (a retry follows), the others pass."""
    expected = 6 if i % 3 == 2 else 5
    return Task(
        meta=TaskMeta(task_id=f"add{i}", category="bugfix", difficulty=3, description="fix"),
        root="",
        problem="`add(a, b)` should return the sum of a and b.",
        starter="def add(a, b):\n    return a - b\n",
        tests={
            "test_add.py": "from solution import add\n\n\ndef test_add():\n"
            f"    assert add(2, 3) == {expected}\n"
        },
    )


class _Dying:
    """A system that kills its own process (SIGKILL) when it starts ``task_id`` the first
    time (the marker file remembers), as if the machine had gone away mid-task."""

    def __init__(self, system: System, task_id: str, marker: Path) -> None:
        self._system, self._task_id, self._marker = system, task_id, marker

    async def run_task(self, task: Task, **kwargs: Any) -> TaskOutcome:
        if task.task_id == self._task_id and not self._marker.exists():
            self._marker.write_text(os.environ.get(NODE_ENV, ""))
            os.kill(os.getpid(), signal.SIGKILL)
        return await self._system.run_task(task, **kwargs)

    def summary(self) -> RunSummary:
        return self._system.summary()


@dataclass(frozen=True)
class FakeFactory:
    """A worker's system factory on the fake backend, each system on its own FakeClock.

    ``fail_node``: workers whose node label starts with it cannot open (a missing model
    file). ``kill_task`` + ``kill_key`` + ``marker``: the first worker to run that triple
    dies in it.
    """

    fail_node: str = ""
    kill_task: str = ""
    kill_key: tuple[str, str] = ("", "")
    marker: str = ""

    @asynccontextmanager
    async def __call__(self, prof: Profile, mode: Mode, events: Path) -> AsyncIterator[System]:
        if self.fail_node and os.environ.get(NODE_ENV, "").startswith(self.fail_node):
            raise ModelFileError("model file /nonexistent/coder.gguf is missing on this node")
        clock = FakeClock()
        async with (
            clock.autojump(),
            fake_system(
                SCRIPTS, budget=250, clock=clock, profile=prof, mode=mode, event_log=events
            ) as (system, _),
        ):
            arm = "single" if prof.pipeline.max_attempts == 1 else "pipeline"
            if self.kill_task and (mode, arm) == self.kill_key:
                yield cast(System, _Dying(system, self.kill_task, Path(self.marker)))
            else:
                yield system
