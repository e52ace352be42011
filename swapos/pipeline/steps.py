"""The steps a conductor takes on one task: its state, generating a phase, recording a
verdict and grading a candidate (each step keeps the task's capsule up to date)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import anyio.to_thread
import msgspec

from swapos.capsule.schema import (
    Artifact,
    Capsule,
    CapsuleError,
    Decision,
    Feedback,
    FeedbackSource,
    PhaseEntry,
    with_decision,
    with_feedback,
    with_history,
    with_verdict,
)
from swapos.data.generation import DraftRequest
from swapos.data.sampling import SamplingParams
from swapos.data.task import Task
from swapos.errors import SwapOSError
from swapos.models.templates import TemplateError
from swapos.pipeline.chat_prompts import build_chat_prompt, replace_answer
from swapos.pipeline.extract import ExtractResult
from swapos.pipeline.grader import GradeResult, count_tests, grade
from swapos.pipeline.identity import candidate_identity
from swapos.pipeline.phase_runner import PhaseRunner
from swapos.pipeline.prompts import Phase, Prompt, build_prompt, capsule_for_task

_TIMINGS = re.compile(r" in \d+(?:\.\d+)?s\b")
"""Wall times in pytest's output; kept out of prompts so runs (and KV prefixes) repeat."""
_ADDRESSES = re.compile(r" at 0x[0-9a-fA-F]+\b")
"""Memory addresses in pytest's output (``<function f at 0x7f9a39d2cc20>``): they differ in
every run, so they too are kept out of prompts."""


class TaskState:
    """The mutable state of one conducted task."""

    def __init__(self, task: Task, *, selfchecks: int = 0) -> None:
        self.capsule: Capsule = capsule_for_task(task)
        self.last: GradeResult | None = None
        self.error: str | None = None
        self.attempts = 0
        self.grades = 0
        self.passed_attempt = 0
        self.failed: dict[str, int] = {}  # normalized candidate -> the attempt whose grade failed
        self.unchecked: dict[str, int] = {}  # ... whose self-check failed (never graded)
        self.selfchecks = selfchecks  # candidates pre-grade checks may still send back
        # A repository task's starter, normalized: a candidate equal to it changed nothing.
        repository = task.category != "completion" and bool(task.starter.strip())
        self.starter = candidate_identity(task.starter) if repository else None


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """A generate phase's answer: with the prompt's answer prefix, and as generated."""

    text: str
    raw: str
    chat: bool
    prompt: Prompt

    def artifact(self, attempt: int, code: str) -> Artifact:
        """The capsule's record of ``code``, extracted from this answer (a chat model's own
        words are kept when they differ from the code)."""
        artifact = Artifact(attempt=attempt, phase="code", code=code)
        return replace_answer(artifact, self.raw) if self.chat else artifact


async def decide(runner: PhaseRunner, st: TaskState, phase: str, text: str) -> None:
    await runner.decide(st.capsule.meta.task_id, phase, text)
    st.capsule = with_decision(st.capsule, Decision(phase=phase, text=text))


async def generate(  # noqa: PLR0917
    runner: PhaseRunner,
    st: TaskState,
    task: Task,
    phase: Phase,
    model: str,
    attempt: int,
    upcoming: Sequence[str],
    *,
    sampling: tuple[float, int] | None = None,
    prompt: Prompt | None = None,
    capsule: Capsule | None = None,
    recap: bool = False,
) -> Answer | None:
    """Build the prompt (unless given; from ``capsule``, default the task's), run the phase;
    the answer or None on error.

    ``sampling`` overrides the phase's ``(temperature, seed)``; ``recap`` asks a chat model
    for its code in a recap (:func:`~swapos.pipeline.chat_prompts.build_chat_prompt`).
    """
    cfg = runner.profile.phase(phase)
    n_ctx = runner.profile.models[model].n_ctx
    budget = min(cfg.prompt_budget_tokens, n_ctx - cfg.max_tokens - 8)
    try:
        counter = await runner.token_counter(model)
        fmt = await runner.chat_format(model)
    except SwapOSError as exc:
        st.error = f"{phase} phase: model {model!r} is unusable: {exc}"
        return None

    shown = capsule or st.capsule

    def build() -> Prompt:
        if fmt is not None:
            return build_chat_prompt(phase, task, shown, counter, budget, fmt, recap=recap)
        return build_prompt(phase, task, shown, counter, budget)

    try:
        if prompt is None:
            prompt = await anyio.to_thread.run_sync(build)
    except (CapsuleError, TemplateError) as exc:
        st.error = f"{phase} prompt: {exc}"
        return None
    temperature, seed = sampling or (cfg.temperature, cfg.seed)
    params = SamplingParams(
        max_tokens=cfg.max_tokens,
        stop=prompt.stop + tuple(cfg.stop),
        temperature=temperature,
        seed=seed,
        draft=DraftRequest(kind="fix" if phase == "code" and attempt > 1 else phase),
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
        special=prompt.chat,
    )
    outcome = "error" if out.error else ("cap" if out.hit_cap else "ok")
    st.capsule = with_history(
        st.capsule, PhaseEntry(phase=phase, model=model, attempt=attempt, outcome=outcome)
    )
    if out.error is not None:
        st.error = f"{phase} phase failed: {out.error}"
        return None
    return Answer(
        text=prompt.answer_prefix + out.text,
        raw=prompt.opening + out.text,
        chat=prompt.chat,
        prompt=prompt,
    )


def record(
    st: TaskState, attempt: int, result: GradeResult, source: FeedbackSource, text: str
) -> None:
    """The verdict on attempt ``attempt`` and what ``source`` said about it, in the capsule."""
    st.capsule = with_verdict(st.capsule, attempt=attempt, passed=result.passed)
    st.capsule = with_feedback(
        st.capsule,
        Feedback(
            attempt=attempt,
            source=source,
            text=text,
            tests_passed=result.tests_passed,
            tests_total=result.tests_total,
        ),
    )


def feedback_text(result: GradeResult) -> str:
    text = result.reason if result.passed else f"{result.reason}\n{result.output_tail}"
    # "1 failed in 0.34s", "<function f at 0x7f...>": the same prompt in every run
    return _ADDRESSES.sub("", _TIMINGS.sub("", text)).strip()


def selfcheck_text(result: GradeResult) -> str:
    """The failed examples, one line each (``f(2) returned 3; the docstring says 4``): the
    self-check's own test code is not the model's business."""
    failed = [
        line.split("AssertionError:", 1)[1].strip()
        for line in result.output_tail.splitlines()
        if line.startswith("E ") and "AssertionError:" in line
    ]
    return "\n".join(dict.fromkeys(failed)) or feedback_text(result)


async def grade_candidate(  # noqa: PLR0917
    runner: PhaseRunner,
    st: TaskState,
    task: Task,
    code: ExtractResult,
    key: str,
    attempt: int,
) -> GradeResult:
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
        timeout = runner.profile.pipeline.grade_timeout_s
        st.grades += 1
        result = await runner.grade_phase(
            task_id=task.task_id,
            attempt=attempt,
            work=lambda abort: grade(task, code.code, timeout_s=timeout, cancel=abort),
        )
    st.last = result
    if not result.passed and code.how != "empty":
        st.failed.setdefault(key, attempt)
    record(st, attempt, result, "grader", feedback_text(result))
    return result
