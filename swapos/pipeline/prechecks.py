"""The self-check a candidate may get before its grade: the examples of the task's docstring
or brief, run in the sandbox. When a candidate is checked, and what a failure leads to, is
the retry policy's (:mod:`swapos.policies.retry`, rules 6 to 8); which examples are no
longer obeyed because the candidates' own evidence says they are wrong is
:func:`swapos.pipeline.selfcheck.distrusted`'s."""

from __future__ import annotations

from swapos.grader import GradeResult, grade
from swapos.pipeline.identity import candidate_identity
from swapos.pipeline.phase_runner import PhaseRunner
from swapos.pipeline.routing import RoutePlan
from swapos.pipeline.selfcheck import (
    CandidateCheck,
    Example,
    distrusted,
    example_outcomes,
    selfcheck_task,
)
from swapos.pipeline.steps import Work, decide, selfcheck_text
from swapos.policies.retry import Checked, SelfCheck


async def selfcheck(runner: PhaseRunner, work: Work, plan: RoutePlan, step: SelfCheck) -> Checked:
    """Run the examples of ``plan`` against the newest answer's code, as ``step.attempt``'s
    ``selfcheck`` phase; the verdict, with the failed examples for the coder. A candidate
    that fails only distrusted examples passes its self-check (the decision is recorded);
    the task's tests still grade it."""
    check = selfcheck_task(work.task, plan.selfcheck)
    timeout = runner.profile.pipeline.grade_timeout_s
    code = work.code.code
    result = await runner.grade_phase(
        task_id=work.task.task_id,
        attempt=step.attempt,
        work=lambda abort: grade(check, code, timeout_s=timeout, cancel=abort),
        phase="selfcheck",
    )
    failed = _remember(work, code, result, plan.selfcheck)
    if failed and failed <= (wrong := distrusted(list(work.checks.values()))):
        await decide(runner, work, "selfcheck", _distrust_text(plan.selfcheck, sorted(wrong)))
        return Checked(passed=True, tests_passed=result.tests_total, tests_total=result.tests_total)
    return Checked(
        passed=result.passed,
        tests_passed=result.tests_passed,
        tests_total=result.tests_total,
        text=selfcheck_text(result),
    )


def _remember(work: Work, code: str, result: GradeResult, examples: list[Example]) -> set[int]:
    """Keep this candidate's per-example outcome (once per distinct source) for
    :func:`distrusted`; the examples it failed (empty when the check says nothing)."""
    passed, failed = example_outcomes(result, examples)
    if passed or failed:
        key = candidate_identity(code)
        work.checks.setdefault(key, CandidateCheck(model=work.model, passed=passed, failed=failed))
    return set(failed)


def _distrust_text(examples: list[Example], wrong: list[int]) -> str:
    """The decision's words: which examples are set aside, and why."""
    calls = "; ".join(f"{examples[i].call} == {examples[i].stated()}" for i in wrong)
    return (
        f"distrusted: {calls} (every checked candidate of every model returns the same "
        "other value): not obeyed; the tests grade"
    )
