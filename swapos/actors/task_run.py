"""The Router as the conductor's :class:`~swapos.pipeline.conductor.PhaseRunner` for one run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from swapos.data.sampling import SamplingParams
from swapos.data.task import Task
from swapos.models.templates import ChatFormat
from swapos.pipeline.phase_runner import PhaseOutput

if TYPE_CHECKING:
    from swapos.actors.router import GradeWork, Router
    from swapos.pipeline.grader import GradeResult


class TaskRun:
    """The Router as the :class:`~swapos.pipeline.conductor.PhaseRunner` of one run of a
    task: everything the conductor records carries the run's id (the conductor names the
    task, the run id tells runs of one task apart)."""

    def __init__(self, router: Router, run_id: str) -> None:
        self._router = router
        self._run_id = run_id
        self.profile = router.profile

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
    ) -> PhaseOutput:
        return await self._router.generate_phase(
            task_id=task_id,
            run_id=self._run_id,
            phase=phase,
            model=model,
            prompt=prompt,
            stable_prefix=stable_prefix,
            params=params,
            attempt=attempt,
            upcoming=upcoming,
            special=special,
        )

    async def grade_phase(
        self, *, task_id: str, attempt: int, work: GradeWork, phase: str = "grade"
    ) -> GradeResult:
        return await self._router.grade_phase(
            task_id=task_id, run_id=self._run_id, attempt=attempt, work=work, phase=phase
        )

    def expects_pass(self) -> bool:
        return self._router.pass_rate.expects_pass()

    async def decide(self, task_id: str, decision: str, text: str) -> None:
        await self._router.decide(task_id, decision, text)

    async def token_counter(self, model: str) -> Callable[[str], int]:
        return await self._router.token_counter(model)

    async def chat_format(self, model: str) -> ChatFormat | None:
        return await self._router.chat_format(model)

    async def task_started(self, task: Task) -> None:
        await self._router.task_started(task, run_id=self._run_id)

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
    ) -> None:
        await self._router.task_finished(
            task,
            run_id=self._run_id,
            passed=passed,
            pass_at_1=pass_at_1,
            iterations=iterations,
            tests_passed=tests_passed,
            tests_total=tests_total,
            error=error,
            passed_attempt=passed_attempt,
            grades=grades,
        )
