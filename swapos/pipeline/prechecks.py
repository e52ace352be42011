"""The self-check a candidate may get before its grade: the examples of the task's docstring
or brief, run in the sandbox. When a candidate is checked, and what a failure leads to, is
the retry policy's (:mod:`swapos.policies.retry`, rules 6 to 8)."""

from __future__ import annotations

from swapos.pipeline.grader import grade
from swapos.pipeline.phase_runner import PhaseRunner
from swapos.pipeline.routing import RoutePlan
from swapos.pipeline.selfcheck import selfcheck_task
from swapos.pipeline.steps import Work, selfcheck_text
from swapos.policies.retry import Checked, SelfCheck


async def selfcheck(runner: PhaseRunner, work: Work, plan: RoutePlan, step: SelfCheck) -> Checked:
    """Run the examples of ``plan`` against the newest answer's code, as ``step.attempt``'s
    ``selfcheck`` phase; the verdict, with the failed examples for the coder."""
    check = selfcheck_task(work.task, plan.selfcheck)
    timeout = runner.profile.pipeline.grade_timeout_s
    code = work.code.code
    result = await runner.grade_phase(
        task_id=work.task.task_id,
        attempt=step.attempt,
        work=lambda abort: grade(check, code, timeout_s=timeout, cancel=abort),
        phase="selfcheck",
    )
    return Checked(
        passed=result.passed,
        tests_passed=result.tests_passed,
        tests_total=result.tests_total,
        text=selfcheck_text(result),
    )
