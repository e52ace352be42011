"""The arms of a suite run and how one system runs one task in one of them.

Shared by the local runner (:mod:`swapos.bench.suite.command`) and the Ray workers
(:mod:`swapos.cluster.worker`), so an arm means the same thing in both.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import msgspec

from swapos.actors.handle import TaskOutcome
from swapos.actors.system import System
from swapos.data.task import Task
from swapos.errors import SwapOSError
from swapos.models.profile import Mode, Profile

ARMS = ("pipeline", "single")
SINGLE_SKIP_REASON = 10**9
"""``skip_reason_max_difficulty`` of the single arm: the router never plans."""


def arm_choices(profile: Profile) -> tuple[str, ...]:
    """The arms ``profile`` allows: :data:`ARMS`, and ``single:<model>`` for each of its
    models (one shot of that model instead of the ``code`` role's)."""
    return (*ARMS, *(f"single:{name}" for name in profile.models))


def is_single(arm: str) -> bool:
    """Whether ``arm`` is a one-shot arm (``single`` or ``single:<model>``)."""
    return arm == "single" or arm.startswith("single:")


SystemFactory = Callable[[Profile, Mode, Path], AbstractAsyncContextManager[System]]
"""Opens the system of one mode/arm: ``(profile, mode, events_path) -> System``."""


def arm_profile(profile: Profile, arm: str) -> Profile:
    """``profile`` for ``arm``: unchanged for ``pipeline``; for ``single``, one code attempt
    and no reason phase (so: code, grade); for ``single:<model>`` the same, written by that
    model (the ``code`` and ``fix`` roles point to it).

    Raises:
        SwapOSError: ``<model>`` is not one of the profile's models.
    """
    if arm == "pipeline":
        return profile
    pipeline = msgspec.structs.replace(
        profile.pipeline, max_attempts=1, skip_reason_max_difficulty=SINGLE_SKIP_REASON
    )
    roles = profile.roles
    if arm.startswith("single:"):
        model = arm.partition(":")[2]
        if model not in profile.models:
            raise SwapOSError(
                f"arm {arm!r}: the profile has no model {model!r}; "
                f"choose from {', '.join(arm_choices(profile))}"
            )
        roles = {**profile.roles, "code": model, "fix": model}
    return msgspec.structs.replace(profile, pipeline=pipeline, roles=roles)


async def run_triple(
    system: System,
    task: Task,
    arm: str,
    *,
    max_attempts: int | None,
    next_task: Task | None,
) -> TaskOutcome:
    """Run ``task`` on ``system`` (one mode/arm): the single arm gets one code attempt."""
    attempts = 1 if is_single(arm) else max_attempts
    return await system.run_task(task, max_attempts=attempts, next_task=next_task)
