"""The self-check a candidate may get before its grade: the examples a pass read of the
task's docstring or brief (:class:`~swapos.pipeline.hooks.ExampleCheck`), run in the
sandbox. When a candidate is checked, and what a failure leads to, is the retry policy's
(:mod:`swapos.policies.retry`, its *Pre-grade checks*, *Draws* and *Sent back* rules); what
the check's result says of the candidate is the pass's."""

from __future__ import annotations

from swapos.grader import grade
from swapos.pipeline.hooks import ExampleCheck
from swapos.pipeline.phase_runner import PhaseRunner
from swapos.pipeline.steps import Work, decide
from swapos.policies.retry import Checked, SelfCheck


async def selfcheck(
    runner: PhaseRunner, work: Work, examples: ExampleCheck, step: SelfCheck
) -> Checked:
    """Run ``examples`` against the newest answer's code, as ``step.attempt``'s
    ``selfcheck`` phase; the verdict, with what failed for the coder (and a decision when
    the pass has one to record)."""
    suite = examples.suite()
    timeout = runner.profile.pipeline.grade_timeout_s
    code = work.code.code
    result = await runner.grade_phase(
        task_id=work.task.task_id,
        attempt=step.attempt,
        work=lambda abort: grade(suite, code, timeout_s=timeout, cancel=abort),
        phase="selfcheck",
    )
    judged = examples.judge(result, code, work.model)
    if judged.said:
        await decide(runner, work, "selfcheck", judged.said)
    return judged.check
