"""Checks before a candidate is graded: a repository task's candidate must change its starter,
and the examples of the task's docstring or brief must hold; on attempt 1 and on a second
opinion a failure draws more candidates from the same prompt (:func:`draw`)."""

from __future__ import annotations

from typing import Final

from swapos.capsule.schema import with_newest_replaced
from swapos.data.task import Task
from swapos.pipeline.extract import ExtractResult, extract_code
from swapos.pipeline.grader import GradeResult, grade
from swapos.pipeline.identity import candidate_identity, resample_seed
from swapos.pipeline.phase_runner import PhaseRunner
from swapos.pipeline.prompts import Prompt
from swapos.pipeline.routing import RoutePlan
from swapos.pipeline.selfcheck import selfcheck_task
from swapos.pipeline.steps import TaskState, decide, generate, record, selfcheck_text

UNCHANGED: Final = "the answer is solution.py unchanged, and the task asks for a change"


async def vetted(  # noqa: PLR0917
    runner: PhaseRunner,
    st: TaskState,
    task: Task,
    plan: RoutePlan,
    found: tuple[ExtractResult, str, Prompt],
    coder: str,
    attempt: int,
    upcoming: list[str],
    *,
    last: bool,
    opinion: bool = False,
) -> tuple[ExtractResult, str] | None:
    """The candidate to grade, after its pre-grade checks: ``found``'s, or (on attempt 1 or
    a second opinion, ``opinion``) the draw that replaced it; None when it goes back to the
    coder (or on error: ``st.error``).

    A candidate its pre-grade check already sent back once is graded this time: the
    docstring's examples advise (a few are wrong), the task's tests decide. Checks send back
    at most ``selfcheck_retries`` candidates; after that a candidate is graded whatever they
    would say, even an unchanged ``solution.py``: its grade shows the critic and the fixer
    which tests fail, which "unchanged" alone does not. A second opinion is checked whatever
    the budget when the profile draws: if it fails, the draws are the stronger model's; if
    none passes and the budget is spent, the second opinion is graded as it is.
    """
    code, key, prompt = found
    cfg = runner.profile.pipeline
    if last or code.how == "empty":
        return code, key
    budget = key not in st.unchecked and st.selfchecks > 0
    drawing = (attempt == 1 or opinion) and cfg.draws > 0
    if not budget and not (opinion and drawing and cfg.selfcheck):
        return code, key
    check = await pre_grade_check(runner, st, task, plan, code.code, key, attempt)
    if check is None or check.passed:
        return code, key
    if check.reason == UNCHANGED:
        await decide(runner, st, "selfcheck", UNCHANGED)
    st.unchecked.setdefault(key, attempt)
    if drawing:
        drawn = await draw(runner, st, task, plan, coder, prompt, upcoming, attempt=attempt)
        if drawn is not None or st.error is not None:
            return drawn
    if not budget:
        await decide(
            runner, st, "code", f"no draw passes the checks: attempt {attempt} is graded as it is"
        )
        return code, key
    record(st, attempt, check, "selfcheck", selfcheck_text(check))
    st.selfchecks -= 1
    return None


async def draw(  # noqa: PLR0917
    runner: PhaseRunner,
    st: TaskState,
    task: Task,
    plan: RoutePlan,
    model: str,
    prompt: Prompt,
    upcoming: list[str],
    *,
    attempt: int,
) -> tuple[ExtractResult, str] | None:
    """Draw up to ``draws`` more candidates for ``attempt`` from ``prompt`` (the one its
    rejected candidate answered; the KV cache holds it), sampling with recorded seeds, and
    self-check each. The first that passes its examples replaces the attempt's artifact: its
    code and identity; None when none passes (or on error: ``st.error`` says).

    A draw that is empty or repeats a rejected candidate is not checked again.
    """
    cfg = runner.profile.pipeline
    temperature = cfg.resample_temperature
    for i in range(1, cfg.draws + 1):
        seed = resample_seed(f"{task.task_id}:draw", attempt, i)
        out = await generate(
            runner, st, task, "code", model, attempt, [model, *upcoming],
            sampling=(temperature, seed), prompt=prompt,
        )  # fmt: skip
        if out is None:
            return None
        code = extract_code(out.text, task=task)
        key = candidate_identity(code.code)
        said = f"draw {i} of {cfg.draws} at temperature {temperature:g} with seed {seed}"
        if code.how == "empty" or key in st.failed or key in st.unchecked:
            await decide(runner, st, "code", f"{said}: empty or a rejected candidate again")
            continue
        check = await pre_grade_check(runner, st, task, plan, code.code, key, attempt)
        passed = check is None or check.passed
        await decide(
            runner, st, "code",
            f"{said}: {check_said(check)}"
            + (f"; graded in place of attempt {attempt}'s candidate" if passed else ""),
        )  # fmt: skip
        if passed:
            st.capsule = with_newest_replaced(st.capsule, out.artifact(attempt, code.code))
            return code, key
        st.unchecked.setdefault(key, attempt)
    return None


async def pre_grade_check(  # noqa: PLR0917
    runner: PhaseRunner,
    st: TaskState,
    task: Task,
    plan: RoutePlan,
    code: str,
    key: str,
    attempt: int,
) -> GradeResult | None:
    """Check a candidate before it is graded (the caller records a failure): a repository
    task's candidate must change its starter, and the examples of its docstring or brief
    must hold. None when there is nothing to check."""
    if key == st.starter:
        return GradeResult(
            passed=False,
            tests_passed=0,
            tests_total=1,
            outcome="fail",
            reason=UNCHANGED,
            duration_s=0.0,
            sandbox=["not run: the starter code needs no sandbox"],
        )
    if not plan.selfcheck:
        return None
    return await _selfcheck(runner, task, plan, code, attempt)


def check_said(check: GradeResult | None) -> str:
    """A pre-grade check's verdict in a few words."""
    if check is None:
        return "nothing to check"
    if check.reason == UNCHANGED:
        return "solution.py unchanged"
    return f"{check.tests_passed}/{check.tests_total} examples pass"


async def _selfcheck(
    runner: PhaseRunner, task: Task, plan: RoutePlan, code: str, attempt: int
) -> GradeResult:
    """Run the examples of the docstring or brief against ``code``."""
    check = selfcheck_task(task, plan.selfcheck)
    timeout = runner.profile.pipeline.grade_timeout_s
    return await runner.grade_phase(
        task_id=task.task_id,
        attempt=attempt,
        work=lambda abort: grade(check, code, timeout_s=timeout, cancel=abort),
        phase="selfcheck",
    )
