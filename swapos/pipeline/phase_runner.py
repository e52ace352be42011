"""What a conductor needs from the Router: :class:`PhaseRunner`, and what a phase gives back."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

import msgspec
from anyio.abc import TaskGroup

from swapos.data.sampling import SamplingParams
from swapos.data.task import Task
from swapos.grader import GradeResult
from swapos.models.profile import Profile
from swapos.models.templates import ChatFormat
from swapos.policies.draws import DrawPlan
from swapos.policies.spending import ModelCost


class PhaseOutput(msgspec.Struct, frozen=True, kw_only=True):
    """What a generate phase gave back; for a draw taken from side by side, ``drew`` its
    ``(temperature, seed)`` when it is another draw than the step named."""

    text: str = ""
    tokens: int = 0
    prefilled: int = 0
    """Prompt tokens evaluated (not restored from the KV cache)."""
    hit_cap: bool = False
    error: str | None = None
    drew: tuple[float, int] | None = None


class Draws(Protocol):
    """Draws of one prompt decoding side by side (:meth:`PhaseRunner.open_draws`)."""

    async def take_first(self, indices: Sequence[int]) -> tuple[int, PhaseOutput]:
        """The first of draws ``indices`` to finish, and its output (an ``error`` if none
        ever will: then the lowest of them)."""
        ...

    async def close(self) -> None:
        """Drop the draws still running; return once their phases are recorded."""
        ...


class PhaseRunner(Protocol):
    """What a conductor needs from the Router."""

    profile: Profile

    async def generate_phase(
        self,
        *,
        task_id: str,
        phase: str,
        model: str,
        prompt: str,
        stable_prefix: str,
        params: SamplingParams,
        attempt: int,
        upcoming: Sequence[str],
        special: bool = False,
    ) -> PhaseOutput: ...

    async def draw_plan(
        self, model: str, draws: int, *, prompt_tokens: int, max_tokens: int
    ) -> DrawPlan:
        """How many of ``draws`` draws of ``model`` to decode side by side
        (:func:`swapos.policies.draws.plan_draws` on its measured cost curve)."""
        ...

    def draw_checked(self, passed: bool) -> None:
        """One draw's check passed or failed (the draws policy learns their pass rate)."""
        ...

    async def open_draws(
        self,
        tg: TaskGroup,
        *,
        task_id: str,
        model: str,
        prompt: str,
        params: Sequence[SamplingParams],
        attempt: int,
        upcoming: Sequence[str],
        special: bool,
        side_by_side: int,
    ) -> Draws:
        """Start decoding one draw per item of ``params`` (in ``tg``), each a code phase of
        its own, ``side_by_side`` at most at once."""
        ...

    async def grade_phase(
        self,
        *,
        task_id: str,
        attempt: int,
        work: Callable[[threading.Event], GradeResult],
        phase: str = "grade",
    ) -> GradeResult: ...

    def expects_pass(self) -> bool:
        """Whether a graded candidate is more likely to pass than not (so far)."""
        ...

    def task_wall(self) -> float:
        """Seconds since the task started (its wall so far)."""
        ...

    async def decide(self, task_id: str, decision: str, text: str) -> None: ...

    async def token_counter(self, model: str) -> Callable[[str], int]: ...

    async def chat_format(self, model: str) -> ChatFormat | None: ...

    async def model_cost(self, model: str) -> ModelCost | None:
        """``model``'s measured token costs (None: not measured)."""
        ...

    async def task_started(self, task: Task) -> None: ...

    async def task_finished(
        self,
        task: Task,
        *,
        passed: bool,
        pass_at_1: bool,
        iterations: int,
        tests_passed: int,
        tests_total: int,
        error: str | None,
        passed_attempt: int = 0,
        grades: int = 0,
    ) -> None: ...
