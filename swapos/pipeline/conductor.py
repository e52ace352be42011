"""Conduct one task through the pipeline: reason -> code -> [selfcheck] -> grade -> critic -> code

The conductor is the Router's per-task state machine, written as a coroutine. It decides
what runs next and builds each prompt from the capsule (a chat for instruct models, a document
to continue for base models); the Router (a :class:`PhaseRunner`) does the running: leasing
models, generating, grading off the event loop, recording.

An *attempt* is one code phase. A candidate is checked against its docstring's examples first
when the router chose self-check (a failure goes straight back to the coder, without spending
a grade), then graded; a failed grade goes to the critic, then to the next attempt, whose
coder is the ``fix`` role: every fixer reads a review of the newest failed grade. A candidate
that repeats one whose grade failed is never graded again: it is generated anew, sampling with
a recorded seed, then by the ``code`` model when the fixer is another, and dropped if it still
repeats. One that repeats a candidate only its self-check rejected is graded (the examples
advise). A repository task's candidate that leaves ``solution.py`` unchanged is sent back
without a grade (but on the last attempt).

When the first attempt's candidate fails its examples and the profile allows ``draws``, more
candidates are drawn from the same prompt (sampled, seeds recorded); the first that passes the
examples takes the attempt's place and is graded. Only if none does does the failure go back
to the coder.

With ``second_opinion`` (and a ``fix`` model other than the ``code`` model), a failed first
attempt is not reviewed: the second attempt is the fix model's own answer to the first
prompt, blind to the failed candidate. Later attempts are reviewed and fixed.
"""

from __future__ import annotations

import ast
import hashlib
import re
import threading
from collections.abc import Callable, Sequence
from typing import Final, Protocol

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
    encode_capsule,
    with_artifact,
    with_decision,
    with_feedback,
    with_history,
    with_newest_replaced,
    with_plan,
    with_verdict,
)
from swapos.data.sampling import SamplingParams
from swapos.data.task import Task
from swapos.errors import SwapOSError
from swapos.models.profile import Profile
from swapos.models.templates import ChatFormat, TemplateError
from swapos.pipeline.chat_prompts import build_chat_prompt, replace_answer
from swapos.pipeline.extract import ExtractResult, extract_code, extract_feedback, extract_plan
from swapos.pipeline.grader import GradeResult, count_tests, grade
from swapos.pipeline.prompts import Phase, Prompt, build_prompt, capsule_for_task
from swapos.pipeline.routing import RoutePlan, route
from swapos.pipeline.selfcheck import selfcheck_task

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
        special: bool = False,
    ) -> PhaseOutput: ...

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

    async def decide(self, task_id: str, decision: str, text: str) -> None: ...

    async def token_counter(self, model: str) -> Callable[[str], int]: ...

    async def chat_format(self, model: str) -> ChatFormat | None: ...

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


class _State:
    """The mutable state of one conducted task."""

    def __init__(self, task: Task) -> None:
        self.capsule: Capsule = capsule_for_task(task)
        self.last: GradeResult | None = None
        self.error: str | None = None
        self.attempts = 0
        self.grades = 0
        self.passed_attempt = 0
        self.failed: dict[str, int] = {}  # normalized candidate -> the attempt whose grade failed
        self.unchecked: dict[str, int] = {}  # ... whose self-check failed (never graded)
        self.selfchecks = 0  # attempts a failed self-check may still send back to the coder
        # A repository task's starter, normalized: a candidate equal to it changed nothing.
        repository = task.category != "completion" and bool(task.starter.strip())
        self.starter = _normalized(task.starter) if repository else None


class _Answer(msgspec.Struct, frozen=True, kw_only=True):
    """A generate phase's answer: with the prompt's answer prefix, and as generated."""

    text: str
    raw: str
    chat: bool
    prompt: Prompt


class Conducted(msgspec.Struct, frozen=True, kw_only=True):
    """How a conducted task ended (its numbers are in the event log)."""

    passed: bool
    error: str | None
    capsule_json: bytes


async def conduct(task: Task, runner: PhaseRunner, *, max_attempts: int | None = None) -> Conducted:
    """Run ``task`` to its end (``max_attempts`` code attempts, default the profile's); every
    failure ends the task with a reason, never a crash of the system. Cancellation propagates
    (the task is recorded as cancelled)."""
    profile = runner.profile
    st = _State(task)
    if profile.pipeline.selfcheck:
        st.selfchecks = profile.pipeline.selfcheck_retries
    await runner.task_started(task)
    try:
        await _pipeline(task, profile, runner, st, max_attempts or profile.pipeline.max_attempts)
    finally:
        last = st.last
        passed = last is not None and last.passed and st.error is None
        with anyio.CancelScope(shield=True):
            await runner.task_finished(
                task,
                passed=passed,
                pass_at_1=passed and st.grades == 1,  # its first graded candidate passed
                iterations=st.attempts,
                tests_passed=last.tests_passed if last else 0,
                tests_total=last.tests_total if last else 0,
                error=st.error if not passed else None,
                passed_attempt=st.passed_attempt if passed else 0,
                grades=st.grades,
            )
    return Conducted(passed=passed, error=st.error, capsule_json=encode_capsule(st.capsule))


async def _pipeline(
    task: Task, profile: Profile, runner: PhaseRunner, st: _State, max_attempts: int
) -> None:
    plan = route(task, profile)
    for text in plan.why:
        await _decide(runner, st, "route", text)
    m = plan.models
    if plan.reason:
        upcoming = [m["code"], m["critic"], m["fix"]]
        out = await _generate(runner, st, task, "reason", m["reason"], 0, upcoming)
        if out is None:
            return
        st.capsule = with_plan(st.capsule, extract_plan(out.text))
    first = st.capsule  # what a first attempt reads: the brief and the plan
    second_opinion = profile.pipeline.second_opinion and m["fix"] != m["code"]
    review_due = False  # a failed grade the critic has not reviewed yet
    for attempt in range(1, max_attempts + 1):
        st.attempts = attempt
        last = attempt == max_attempts
        fresh = attempt == 2 and second_opinion
        if review_due and not fresh:
            # Every fixer reads a review of the newest failed grade, also when the attempt
            # after it was not graded (it repeated a failed candidate, or its checks failed).
            if not await _review(runner, st, task, m, attempt - 1):
                return
            review_due = False
        # After the code phase comes grading; on failure the critic, then the fixer (after
        # a first attempt with a second opinion: the fixer, then the critic). That is the
        # schedule the Prefetcher acts on while candidates more often fail than pass; once
        # they more often pass, the next use after the grade is the next task's.
        after = (
            [m["fix"], m["critic"]] if attempt == 1 and second_opinion else [m["critic"], m["fix"]]
        )
        upcoming = [] if last or runner.expects_pass() else after
        coder = m["code"] if attempt == 1 else m["fix"]
        if fresh:
            await _decide(
                runner, st, "code",
                f"attempt 2 is a second opinion: {coder} answers the first prompt afresh, "
                "without the failed candidate",
            )  # fmt: skip
        # A fixer that keeps repeating a failed candidate hands the attempt to the other
        # model (not for a second opinion: the code model already answered its prompt).
        other = m["code"] if attempt > 1 and not fresh and coder != m["code"] else None
        found = await _candidate(
            runner, st, task, coder, attempt,
            upcoming=upcoming, capsule=first if fresh else None, other=other,
        )  # fmt: skip
        if found is None:
            return
        code, key, _ = found
        if code.how != "empty" and key in st.failed:
            continue  # every try repeated a failed candidate: not graded again
        vetted = await _vetted(runner, st, task, plan, found, coder, attempt, upcoming, last=last)
        if vetted is None:
            if st.error is not None:
                return
            continue  # sent back to the coder without a grade
        code, key = vetted
        result = await _grade(runner, st, task, code, key, attempt)
        if result.passed:
            st.passed_attempt = attempt
            return
        if last:
            return
        review_due = True  # the next fixer's review (a second opinion reads none)


async def _vetted(  # noqa: PLR0917
    runner: PhaseRunner,
    st: _State,
    task: Task,
    plan: RoutePlan,
    found: tuple[ExtractResult, str, Prompt],
    coder: str,
    attempt: int,
    upcoming: list[str],
    *,
    last: bool,
) -> tuple[ExtractResult, str] | None:
    """The candidate to grade, after its pre-grade checks: ``found``'s, or (on attempt 1) the
    draw that replaced it; None when it goes back to the coder (or on error: ``st.error``).

    A candidate its self-check already sent back once is graded this time: the docstring's
    examples advise (a few are wrong), the task's tests decide. One that leaves a repository
    task's starter unchanged is checked whatever is left of the self-check budget (it costs no
    sandbox run), and graded only on the last attempt.
    """
    code, key, prompt = found
    unchanged = runner.profile.pipeline.selfcheck and key == st.starter
    checked = key in st.unchecked and not unchanged
    if last or code.how == "empty" or checked or not (st.selfchecks > 0 or unchanged):
        return code, key
    check = await _check(runner, st, task, plan, code.code, key, attempt)
    if check is None or check.passed:
        return code, key
    if unchanged:
        await runner.decide(task.task_id, "selfcheck", UNCHANGED)
    st.unchecked.setdefault(key, attempt)
    if attempt == 1 and runner.profile.pipeline.draws > 0:
        drawn = await _draw(runner, st, task, plan, coder, prompt, upcoming)
        if drawn is not None or st.error is not None:
            return drawn
    _record(st, attempt, check, "selfcheck", _selfcheck_text(check))
    st.selfchecks -= 0 if unchanged else 1
    return None


async def _review(
    runner: PhaseRunner, st: _State, task: Task, m: dict[str, str], attempt: int
) -> bool:
    """The critic reviews the attempts up to ``attempt`` (the newest); its review goes into
    the capsule. False on error (``st.error`` says)."""
    review = await _generate(runner, st, task, "critic", m["critic"], attempt, [m["fix"]])
    if review is None:
        return False
    text = extract_feedback(review.text)
    st.capsule = with_feedback(st.capsule, Feedback(attempt=attempt, source="critic", text=text))
    return True


async def _decide(runner: PhaseRunner, st: _State, phase: str, text: str) -> None:
    await runner.decide(st.capsule.meta.task_id, phase, text)
    st.capsule = with_decision(st.capsule, Decision(phase=phase, text=text))


async def _candidate(
    runner: PhaseRunner,
    st: _State,
    task: Task,
    model: str,
    attempt: int,
    *,
    upcoming: list[str],
    capsule: Capsule | None = None,
    other: str | None = None,
) -> tuple[ExtractResult, str, Prompt] | None:
    """Generate attempt ``attempt``'s code and add it to the capsule: the extracted code, its
    identity (:func:`_normalized`) and the prompt it answered; None on error. The prompt is
    built from ``capsule`` when given (what the model is shown), else from the task's.

    A candidate that repeats a failed one is generated again (``resamples`` times at most,
    sampling at ``resample_temperature`` with a seed recorded in the decision), then once by
    the ``other`` model (greedy) when given; if it still repeats, it is recorded as failed
    with the attempt it repeats.
    """
    cfg = runner.profile.pipeline
    tries: list[tuple[str, tuple[float, int] | None]] = [(model, None)]
    tries += [
        (model, (cfg.resample_temperature, _seed(task.task_id, attempt, r)))
        for r in range(cfg.resamples)
    ]
    tries += [(other, None)] if other is not None else []
    out: _Answer | None = None
    for i, (who, sampling) in enumerate(tries):
        out = await _generate(
            runner, st, task, "code", who, attempt, upcoming,
            sampling=sampling, capsule=capsule,
        )  # fmt: skip
        if out is None:
            return None
        code = extract_code(out.text, task=task)
        key = _normalized(code.code)
        repeats = st.failed.get(key) if code.how != "empty" else None
        if repeats is None:
            break
        if i + 1 == len(tries):
            await _decide(
                runner, st, "code",
                f"attempt {attempt} repeats attempt {repeats} after {cfg.resamples} resamples"
                + (f" and {other}'s answer" if other is not None else "")
                + "; not graded again",
            )  # fmt: skip
            break
        then, resampled = tries[i + 1]
        again = (
            f"asking {then} instead"
            if resampled is None
            else f"sampling again at temperature {resampled[0]:g} with seed {resampled[1]}"
        )
        await _decide(runner, st, "code", f"attempt {attempt} repeats attempt {repeats}: {again}")
    assert out is not None  # the loop ran at least once
    artifact = Artifact(attempt=attempt, phase="code", code=code.code)
    if out.chat:
        artifact = replace_answer(artifact, out.raw)
    st.capsule = with_artifact(st.capsule, artifact)
    if repeats is not None:
        st.capsule = with_verdict(st.capsule, attempt=attempt, passed=False)
        st.capsule = with_feedback(
            st.capsule,
            Feedback(
                attempt=attempt,
                source="grader",
                text=f"Identical to attempt {repeats}, which failed; not graded again.",
            ),
        )
    return code, key, out.prompt


async def _draw(  # noqa: PLR0917
    runner: PhaseRunner,
    st: _State,
    task: Task,
    plan: RoutePlan,
    model: str,
    prompt: Prompt,
    upcoming: list[str],
) -> tuple[ExtractResult, str] | None:
    """Draw up to ``draws`` more candidates for attempt 1 from ``prompt`` (the one its
    rejected candidate answered; the KV cache holds it), sampling with recorded seeds, and
    self-check each. The first that passes its examples replaces the attempt's artifact: its
    code and identity; None when none passes (or on error: ``st.error`` says).

    A draw that is empty or repeats a rejected candidate is not checked again.
    """
    cfg = runner.profile.pipeline
    temperature = cfg.resample_temperature
    for i in range(1, cfg.draws + 1):
        seed = _seed(f"{task.task_id}:draw", 1, i)
        out = await _generate(
            runner, st, task, "code", model, 1, [model, *upcoming],
            sampling=(temperature, seed), prompt=prompt,
        )  # fmt: skip
        if out is None:
            return None
        code = extract_code(out.text, task=task)
        key = _normalized(code.code)
        said = f"draw {i} of {cfg.draws} at temperature {temperature:g} with seed {seed}"
        if code.how == "empty" or key in st.failed or key in st.unchecked:
            await _decide(runner, st, "code", f"{said}: empty or a rejected candidate again")
            continue
        check = await _check(runner, st, task, plan, code.code, key, 1)
        passed = check is None or check.passed
        await _decide(
            runner, st, "code",
            f"{said}: {_check_said(check)}"
            + ("; graded in place of the first candidate" if passed else ""),
        )  # fmt: skip
        if passed:
            artifact = Artifact(attempt=1, phase="code", code=code.code)
            if out.chat:
                artifact = replace_answer(artifact, out.raw)
            st.capsule = with_newest_replaced(st.capsule, artifact)
            return code, key
        st.unchecked.setdefault(key, 1)
    return None


def _normalized(code: str) -> str:
    """A candidate's identity: its syntax tree, where a redefined function or class counts
    once, as defined last (comments, layout and docstrings do not count). So a chat model's
    rewrite after the prompt's stub equals the same function written as a continuation."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return " ".join(code.split())
    body: dict[object, ast.stmt] = {}
    for i, node in enumerate(tree.body):
        key: object = i
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.body and _is_docstring(node.body[0]):
                node.body = node.body[1:] or [ast.Pass()]
            key = node.name
        body.pop(key, None)
        body[key] = node
    try:
        return ast.dump(ast.Module(body=list(body.values()), type_ignores=[]))
    except (RecursionError, MemoryError):
        return " ".join(code.split())


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _seed(task_id: str, attempt: int, resample: int) -> int:
    """A reproducible sampling seed for one resample of one attempt of one task."""
    digest = hashlib.blake2b(f"{task_id}:{attempt}:{resample}".encode(), digest_size=4)
    return int.from_bytes(digest.digest(), "big")


async def _generate(  # noqa: PLR0917
    runner: PhaseRunner,
    st: _State,
    task: Task,
    phase: Phase,
    model: str,
    attempt: int,
    upcoming: Sequence[str],
    *,
    sampling: tuple[float, int] | None = None,
    prompt: Prompt | None = None,
    capsule: Capsule | None = None,
) -> _Answer | None:
    """Build the prompt (unless given; from ``capsule``, default the task's), run the phase;
    the answer or None on error.

    ``sampling`` overrides the phase's ``(temperature, seed)``.
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
            return build_chat_prompt(phase, task, shown, counter, budget, fmt)
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
    return _Answer(
        text=prompt.answer_prefix + out.text,
        raw=prompt.opening + out.text,
        chat=prompt.chat,
        prompt=prompt,
    )


UNCHANGED: Final = "the answer is solution.py unchanged, and the task asks for a change"


async def _check(  # noqa: PLR0917
    runner: PhaseRunner,
    st: _State,
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


def _check_said(check: GradeResult | None) -> str:
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


def _record(
    st: _State, attempt: int, result: GradeResult, source: FeedbackSource, text: str
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


def _feedback_text(result: GradeResult) -> str:
    text = result.reason if result.passed else f"{result.reason}\n{result.output_tail}"
    return _TIMINGS.sub("", text).strip()  # "1 failed in 0.34s": same prompt in every run


def _selfcheck_text(result: GradeResult) -> str:
    """The failed examples, one line each (``f(2) returned 3; the docstring says 4``): the
    self-check's own test code is not the model's business."""
    failed = [
        line.split("AssertionError:", 1)[1].strip()
        for line in result.output_tail.splitlines()
        if line.startswith("E ") and "AssertionError:" in line
    ]
    return "\n".join(dict.fromkeys(failed)) or _feedback_text(result)


async def _grade(  # noqa: PLR0917
    runner: PhaseRunner,
    st: _State,
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
    _record(st, attempt, result, "grader", _feedback_text(result))
    return result
