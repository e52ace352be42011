"""How the conductor carries out the retry policy's steps on one task
(:mod:`swapos.policies.retry`): each step's I/O through the :class:`PhaseRunner`, and what
it writes into the task's capsule. Which step comes next is the policy's alone."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

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
    with_artifact,
    with_decision,
    with_feedback,
    with_history,
    with_newest_replaced,
    with_plan,
    with_verdict,
)
from swapos.data.generation import DraftRequest
from swapos.data.sampling import SamplingParams
from swapos.data.task import Task
from swapos.errors import SwapOSError
from swapos.grader import GradeResult, count_tests, grade
from swapos.models.model_config import start_ctx
from swapos.models.templates import TemplateError
from swapos.pipeline import side_by_side
from swapos.pipeline.chat_prompts import build_chat_prompt, replace_answer
from swapos.pipeline.extract import ExtractResult, extract_code, extract_plan
from swapos.pipeline.hooks import NO_PASSES, Brief, Passes
from swapos.pipeline.identity import candidate_identity
from swapos.pipeline.phase_runner import PhaseOutput, PhaseRunner
from swapos.pipeline.prompts import Phase, Prompt, build_prompt, capsule_for_task
from swapos.policies.retry import (
    NO_CODE,
    Adopt,
    Failed,
    Generate,
    Generated,
    Grade,
    Graded,
    Keep,
    Priced,
    Replace,
    SendBack,
)
from swapos.policies.retry_text import identical
from swapos.policies.tokens import common_prefix_len

_TIMINGS = re.compile(r" in \d+(?:\.\d+)?s\b")
"""Wall times in pytest's output; kept out of prompts so runs (and KV prefixes) repeat."""
_ADDRESSES = re.compile(r" at 0x[0-9a-fA-F]+\b")
"""Memory addresses in pytest's output (``<function f at 0x7f9a39d2cc20>``): they differ in
every run, so they too are kept out of prompts."""


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """A generate phase's answer: with the prompt's answer prefix, and as generated."""

    text: str
    raw: str
    chat: bool
    prompt: Prompt
    drew: tuple[float, int] | None = None  # a draw's sampling, when not the step's own
    tokens: int = 0
    prefilled: int = 0

    def artifact(self, attempt: int, code: str) -> Artifact:
        """The capsule's record of ``code``, extracted from this answer (a chat model's own
        words are kept when they differ from the code)."""
        artifact = Artifact(attempt=attempt, phase="code", code=code)
        return replace_answer(artifact, self.raw) if self.chat else artifact


class Work:
    """What the steps of one task work on: the passes it runs with and what they read of its
    brief, its capsule (what every prompt is built from), the first prompt's capsule (a
    second opinion's), the newest answer and the candidate in hand. Written by the steps;
    every decision is in the policy's ``TaskState``."""

    def __init__(self, task: Task, passes: Passes = NO_PASSES) -> None:
        self.task = task
        self.passes = passes
        self.brief = Brief()
        self.capsule: Capsule = capsule_for_task(task)
        self.first: Capsule | None = None
        self.answer: Answer | None = None  # the newest code answer, and its code
        self.code = ExtractResult(code="", how="empty")
        self.candidate = self.code  # the attempt's candidate (kept, or a draw in its place)
        self.prompt: Prompt | None = None  # the prompt the candidate answered (draws reuse it)
        self.drawn: dict[str, tuple[Answer, ExtractResult]] = {}  # draws by identity
        self.model = ""  # the model that wrote the newest answer
        self.sent: dict[str, list[str]] = {}  # model -> the prompts the task sent it
        self.draws = side_by_side.DrawState()  # draws decoding side by side


async def decide(runner: PhaseRunner, work: Work, phase: str, text: str) -> None:
    """Record a decision in both of its records: the event log and the capsule's."""
    await runner.decide(work.task.task_id, phase, text)
    work.capsule = with_decision(work.capsule, Decision(phase=phase, text=text))


async def generate(runner: PhaseRunner, work: Work, step: Generate) -> Generated | Failed:
    """Run ``step``'s phase and put what it says in the capsule: a plan, or (for a code
    phase) the newest answer, repaired by the task's passes, whose identity and defect (what
    the passes see wrong with it without a run) the outcome carries."""
    out = await _answer(runner, work, step)
    if isinstance(out, str):
        return Failed(error=out)
    paid = Generated(chat=out.chat, model=step.model, tokens=out.tokens, prefilled=out.prefilled)
    if step.prompt == "plan":
        work.capsule = with_plan(work.capsule, extract_plan(out.text))
        return paid
    work.answer, work.code = out, extract_code(out.text, task=work.task)
    empty = work.code.how == "empty"
    if not empty:
        code, said = work.passes.repaired(work.task, work.code.code, edit_of=out.prompt.edit_base)
        work.code = msgspec.structs.replace(work.code, code=code)
        for text in said:
            await decide(runner, work, "code", text)
    work.model = step.model
    key = candidate_identity(work.code.code)
    if step.prompt == "draw":
        work.drawn[key] = (out, work.code)
    defect = "" if empty else work.passes.defect(work.task, work.code.code)
    return msgspec.structs.replace(paid, key=key, empty=empty, drew=out.drew, defect=defect)


async def price(runner: PhaseRunner, work: Work, step: Generate) -> Priced | Failed:
    """What ``step``'s prompt would prefill: its tokens less the prefix it shares with a
    prompt the task sent the same model before (what that model's KV cache can restore)."""
    built = await _prompt(runner, work, step)
    if isinstance(built, str):
        return Failed(error=built)
    prompt, counter = built
    sent = work.sent.get(step.model, ())
    shared = max((common_prefix_len(prompt.text, s) for s in sent), default=0)
    restorable = counter(prompt.text[:shared]) if shared else 0
    return Priced(prefill=max(0, counter(prompt.text) - restorable))


async def _prompt(
    runner: PhaseRunner, work: Work, step: Generate
) -> tuple[Prompt, Callable[[str], int]] | str:
    """``step``'s prompt and its model's token counter, or why there is none."""
    phase: Phase = step.phase
    cfg = runner.profile.phase(phase)
    try:
        counter = await runner.token_counter(step.model)
        fmt = await runner.chat_format(step.model)
    except SwapOSError as exc:
        return f"{phase} phase: model {step.model!r} is unusable: {exc}"
    shown = work.first if step.prompt == "opinion" and work.first is not None else work.capsule
    n_ctx = start_ctx(runner.profile.models[step.model])  # the context it is loaded with
    budget = min(cfg.prompt_budget_tokens, n_ctx - cfg.max_tokens - 8)
    recap, base = step.prompt == "recap", step.base

    def build() -> Prompt:
        task = work.task
        if fmt is not None:
            return build_chat_prompt(
                phase, task, shown, counter, budget, fmt, recap=recap, base=base,
                opening=work.brief.opening,
            )  # fmt: skip
        return build_prompt(phase, task, shown, counter, budget, base=base)

    try:
        given = work.prompt if step.prompt == "draw" else None  # a draw reuses its prompt
        prompt = given if given is not None else await anyio.to_thread.run_sync(build)
    except (CapsuleError, TemplateError) as exc:
        return f"{phase} prompt: {exc}"
    return prompt, counter


async def _answer(runner: PhaseRunner, work: Work, step: Generate) -> Answer | str:
    """Build ``step``'s prompt and run its phase: the answer, or why there is none."""
    phase: Phase = step.phase
    cfg = runner.profile.phase(phase)
    if step.prompt == "first" and work.first is None:
        work.first = work.capsule  # what a first attempt reads: the brief and the plan
    built = await _prompt(runner, work, step)
    if isinstance(built, str):
        return built
    prompt, sent = built[0], work.sent.setdefault(step.model, [])
    if prompt.text not in sent:
        sent.append(prompt.text)
    temperature, seed = step.sampling or (cfg.temperature, cfg.seed)
    params = SamplingParams(
        max_tokens=cfg.max_tokens, stop=prompt.stop + tuple(cfg.stop), temperature=temperature,
        seed=seed,
        draft=DraftRequest(kind="fix" if phase == "code" and step.attempt > 1 else phase),
    )  # fmt: skip

    async def in_turn() -> PhaseOutput:
        return await runner.generate_phase(
            task_id=work.task.task_id, phase=phase, model=step.model, prompt=prompt.text,
            stable_prefix=prompt.stable, params=params, attempt=step.attempt,
            upcoming=step.upcoming, special=prompt.chat,
        )  # fmt: skip

    async def decided(text: str) -> None:
        await decide(runner, work, "code", text)

    if step.prompt == "draw":
        out = await side_by_side.generate(
            runner, work.draws, step, task_id=work.task.task_id, prompt=prompt.text,
            params=params, special=prompt.chat, decide=decided, in_turn=in_turn,
        )  # fmt: skip
    else:
        out = await in_turn()
    outcome = "error" if out.error else ("cap" if out.hit_cap else "ok")
    entry = PhaseEntry(phase=phase, model=step.model, attempt=step.attempt, outcome=outcome)
    work.capsule = with_history(work.capsule, entry)
    if out.error is not None:
        return f"{phase} phase failed: {out.error}"
    text, raw = prompt.answer_prefix + out.text, prompt.opening + out.text
    return Answer(
        text=text, raw=raw, chat=prompt.chat, prompt=prompt, drew=out.drew, tokens=out.tokens,
        prefilled=out.prefilled,
    )  # fmt: skip


def keep(work: Work, step: Keep) -> None:
    """The newest answer becomes ``step.attempt``'s candidate, in the capsule."""
    assert work.answer is not None  # a code phase answered before
    work.candidate, work.prompt = work.code, work.answer.prompt
    work.capsule = with_artifact(work.capsule, work.answer.artifact(step.attempt, work.code.code))
    if step.repeats:
        work.capsule = with_verdict(work.capsule, attempt=step.attempt, passed=False)
        text = identical(step.repeats)
        feedback = Feedback(attempt=step.attempt, source="grader", text=text)
        work.capsule = with_feedback(work.capsule, feedback)


def replace(work: Work, step: Replace) -> None:
    """The newest answer (a draw), or the draw ``step.key`` names, takes the place of the
    attempt's candidate."""
    answer, code = work.drawn[step.key] if step.key else (work.answer, work.code)
    assert answer is not None  # the draw answered
    work.candidate = code
    work.capsule = with_newest_replaced(work.capsule, answer.artifact(step.attempt, code.code))


def send_back(work: Work, step: SendBack) -> None:
    """The candidate's failed check is its verdict, and what the coder reads of it."""
    record(
        work, step.attempt, passed=False, source="selfcheck", text=step.text,
        counts=(step.tests_passed, step.tests_total),
    )  # fmt: skip


def record(
    work: Work, attempt: int, *, passed: bool, source: FeedbackSource, text: str,
    counts: tuple[int, int],
) -> None:  # fmt: skip
    """The verdict on attempt ``attempt`` and what ``source`` said about it (with the tests
    passed of the tests run), in the capsule."""
    work.capsule = with_verdict(work.capsule, attempt=attempt, passed=passed)
    tests_passed, tests_total = counts
    feedback = Feedback(
        attempt=attempt, source=source, text=text, tests_passed=tests_passed,
        tests_total=tests_total,
    )  # fmt: skip
    work.capsule = with_feedback(work.capsule, feedback)


def adopt(work: Work, step: Adopt) -> None:
    """A copy of ``step.attempt``'s candidate goes last in the capsule: the task's result."""
    artifacts = [a for a in work.capsule.artifacts if a.attempt == step.attempt]
    if artifacts:
        work.capsule = with_artifact(work.capsule, artifacts[-1])


def feedback_text(result: GradeResult) -> str:
    text = result.reason if result.passed else f"{result.reason}\n{result.output_tail}"
    # "1 failed in 0.34s", "<function f at 0x7f...>": the same prompt in every run
    return _ADDRESSES.sub("", _TIMINGS.sub("", text)).strip()


async def grade_candidate(runner: PhaseRunner, work: Work, step: Grade) -> Graded:
    """Grade the attempt's candidate with the task's tests in the sandbox (not an empty one:
    it fails with ``NO_CODE``), and record the verdict and the test output."""
    task = work.task
    if not step.run:
        result = GradeResult(
            passed=False, tests_passed=0, tests_total=count_tests(task.tests), outcome="error",
            reason=NO_CODE, duration_s=0.0, sandbox=["not run: no code"],
        )  # fmt: skip
    else:
        code, timeout = work.candidate.code, runner.profile.pipeline.grade_timeout_s
        result = await runner.grade_phase(
            task_id=task.task_id,
            attempt=step.attempt,
            work=lambda abort: grade(task, code, timeout_s=timeout, cancel=abort),
        )
    counts = (result.tests_passed, result.tests_total)
    text = feedback_text(result)
    record(work, step.attempt, passed=result.passed, source="grader", text=text, counts=counts)
    failure = "" if result.passed else hashlib.sha256(text.encode()).hexdigest()[:16]
    return Graded(
        passed=result.passed, tests_passed=counts[0], tests_total=counts[1], failure=failure
    )
