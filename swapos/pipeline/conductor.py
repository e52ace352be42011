"""Conduct one task through the pipeline: reason -> code -> grade -> critic -> code ...

The conductor is the Router's per-task state machine, written as a coroutine. It decides
what runs next and builds each prompt from the capsule; the Router (a :class:`PhaseRunner`)
does the running: leasing models, generating, grading off the event loop, recording.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol

import anyio.to_thread
import msgspec

from swapos.backends.base import SamplingParams
from swapos.capsule.schema import (
    Artifact,
    Capsule,
    CapsuleError,
    Decision,
    Feedback,
    PhaseEntry,
    encode_capsule,
    with_artifact,
    with_decision,
    with_feedback,
    with_history,
    with_plan,
    with_verdict,
)
from swapos.errors import SwapOSError
from swapos.messages.commands import RunTask, TaskDone
from swapos.models.profile import Profile
from swapos.pipeline.extract import extract_code, extract_feedback, extract_plan
from swapos.pipeline.grader import GradeResult, count_tests, grade
from swapos.pipeline.prompts import Phase, Prompt, build_prompt, capsule_for_task
from swapos.pipeline.routing import route
from swapos.pipeline.task import Task

_TIMINGS = re.compile(r" in \d+(?:\.\d+)?s\b")
"""Wall times in pytest's output; kept out of prompts so runs (and KV prefixes) repeat."""


class PhaseOutput(msgspec.Struct, frozen=True, kw_only=True):
    """What a generate phase gave back."""

    text: str = ""
    tokens: int = 0
    hit_cap: bool = False
    error: str | None = None


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
    ) -> PhaseOutput: ...

    async def grade_phase(
        self, *, task_id: str, attempt: int, work: Callable[[], GradeResult]
    ) -> GradeResult: ...

    async def decide(self, task_id: str, decision: str, text: str) -> None: ...

    async def token_counter(self, model: str) -> Callable[[str], int]: ...

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
    ) -> None: ...


class _State:
    """The mutable state of one conducted task."""

    def __init__(self, task: Task) -> None:
        self.capsule: Capsule = capsule_for_task(task)
        self.last: GradeResult | None = None
        self.error: str | None = None
        self.attempts = 0
        self.passed_first = False


async def conduct(req: RunTask, runner: PhaseRunner) -> TaskDone:
    """Run ``req.task`` to its end; every failure ends the task with a reason, never a crash
    of the system. Cancellation propagates (the task is recorded as cancelled)."""
    task, profile = req.task, runner.profile
    st = _State(task)
    await runner.task_started(task)
    try:
        await _pipeline(
            task, profile, runner, st, req.max_attempts or profile.pipeline.max_attempts
        )
    finally:
        last = st.last
        passed = last is not None and last.passed and st.error is None
        with anyio.CancelScope(shield=True):
            await runner.task_finished(
                task,
                passed=passed,
                pass_at_1=st.passed_first,
                iterations=st.attempts,
                tests_passed=last.tests_passed if last else 0,
                tests_total=last.tests_total if last else 0,
                error=st.error if not passed else None,
            )
    return TaskDone(
        request_id=req.request_id,
        task_id=task.task_id,
        passed=passed,
        error=st.error,
        capsule_json=encode_capsule(st.capsule),
    )


async def _pipeline(
    task: Task, profile: Profile, runner: PhaseRunner, st: _State, max_attempts: int
) -> None:
    tid = task.task_id
    plan = route(task, profile)
    for text in plan.why:
        await runner.decide(tid, "route", text)
        st.capsule = with_decision(st.capsule, Decision(phase="route", text=text))
    m = plan.models
    if plan.reason:
        out = await _generate(
            runner,
            st,
            task,
            "reason",
            m["reason"],
            attempt=0,
            upcoming=[m["code"], m["critic"], m["code"]],
        )
        if out is None:
            return
        st.capsule = with_plan(st.capsule, extract_plan(out))
    for attempt in range(1, max_attempts + 1):
        st.attempts = attempt
        # After the code phase comes grading; on failure (the likely case for small models)
        # the critic, then code again: that is the schedule the Prefetcher acts on.
        upcoming = [m["critic"], m["code"]] if attempt < max_attempts else []
        out = await _generate(
            runner, st, task, "code", m["code"], attempt=attempt, upcoming=upcoming
        )
        if out is None:
            return
        result = await _grade(runner, st, task, out, attempt, profile)
        if result.passed:
            st.passed_first = attempt == 1
            return
        if attempt == max_attempts:
            return
        review = await _generate(
            runner, st, task, "critic", m["critic"], attempt=attempt, upcoming=[m["code"]]
        )
        if review is None:
            return
        st.capsule = with_feedback(
            st.capsule, Feedback(attempt=attempt, source="critic", text=extract_feedback(review))
        )


async def _generate(
    runner: PhaseRunner,
    st: _State,
    task: Task,
    phase: Phase,
    model: str,
    *,
    attempt: int,
    upcoming: Sequence[str],
) -> str | None:
    """Build the prompt, run the phase; the answer (prefix included) or None on error."""
    cfg = runner.profile.phase(phase)
    n_ctx = runner.profile.models[model].n_ctx
    budget = min(cfg.prompt_budget_tokens, n_ctx - cfg.max_tokens - 8)
    try:
        counter = await runner.token_counter(model)
    except SwapOSError as exc:
        st.error = f"{phase} phase: model {model!r} is unusable: {exc}"
        return None
    try:
        prompt: Prompt = await anyio.to_thread.run_sync(
            lambda: build_prompt(phase, task, st.capsule, counter, budget)
        )
    except CapsuleError as exc:
        st.error = f"{phase} prompt: {exc}"
        return None
    params = SamplingParams(
        max_tokens=cfg.max_tokens,
        stop=prompt.stop + tuple(cfg.stop),
        temperature=cfg.temperature,
        seed=cfg.seed,
    )
    out = await runner.generate_phase(
        task_id=task.task_id,
        phase=phase,
        model=model,
        prompt=prompt.text,
        stable_prefix=prompt.stable,
        params=params,
        attempt=attempt,
        upcoming=upcoming,
    )
    outcome = "error" if out.error else ("cap" if out.hit_cap else "ok")
    st.capsule = with_history(
        st.capsule, PhaseEntry(phase=phase, model=model, attempt=attempt, outcome=outcome)
    )
    if out.error is not None:
        st.error = f"{phase} phase failed: {out.error}"
        return None
    return prompt.answer_prefix + out.text


async def _grade(  # noqa: PLR0917
    runner: PhaseRunner, st: _State, task: Task, output: str, attempt: int, profile: Profile
) -> GradeResult:
    code = extract_code(output, task=task)
    st.capsule = with_artifact(st.capsule, Artifact(attempt=attempt, phase="code", code=code.code))
    if code.how == "empty":
        result = GradeResult(
            passed=False,
            tests_passed=0,
            tests_total=count_tests(task.tests),
            outcome="error",
            reason="the model produced no code (empty or prose-only answer)",
            duration_s=0.0,
            sandbox=["not run: no code"],
        )
        await runner.decide(task.task_id, "grade", result.reason)
    else:
        timeout = profile.pipeline.grade_timeout_s
        result = await runner.grade_phase(
            task_id=task.task_id,
            attempt=attempt,
            work=lambda: grade(task, code.code, timeout_s=timeout),
        )
    st.last = result
    st.capsule = with_verdict(st.capsule, attempt=attempt, passed=result.passed)
    feedback = result.reason if result.passed else f"{result.reason}\n{result.output_tail}"
    feedback = _TIMINGS.sub("", feedback)  # "1 failed in 0.34s": same prompt in every run
    st.capsule = with_feedback(
        st.capsule,
        Feedback(
            attempt=attempt,
            source="grader",
            text=feedback.strip(),
            tests_passed=result.tests_passed,
            tests_total=result.tests_total,
        ),
    )
    return result
