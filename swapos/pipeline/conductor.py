"""Conduct one task through the pipeline: reason -> code -> [selfcheck] -> grade -> critic -> code

The conductor is the Router's per-task state machine, written as a coroutine. It decides
what runs next and builds each prompt from the capsule (a chat for instruct models, a document
to continue for base models); the Router (a :class:`PhaseRunner`) does the running: leasing
models, generating, grading off the event loop, recording.

An *attempt* is one code phase. A candidate is checked against its docstring's examples first
when the router chose self-check (a failure goes straight back to the coder, without spending
a grade), then graded; a failed grade goes to the critic, then to the next attempt, whose
coder is the ``fix`` role: every fixer reads a review of the newest failed grade. A candidate
that repeats one whose grade failed is never graded again: it is asked for again, in a recap
of the failed answers (a chat model), sampling with a recorded seed, then by the ``code``
model when the fixer is another, and dropped if it still repeats. One that repeats a
candidate only its self-check rejected is graded (the examples advise). A repository task's
candidate that leaves ``solution.py`` unchanged is sent back like one that fails its examples.

When the first attempt's candidate fails its examples and the profile allows ``draws``, more
candidates are drawn from the same prompt (sampled, seeds recorded); the first that passes the
examples takes the attempt's place and is graded. Only if none does does the failure go back
to the coder. A second opinion is checked and drawn for the same way, by its own model, even
when the first attempt spent the self-check budget; if none of its draws passes, it is graded
(once the budget is spent; before, its failure goes back as any other).

With ``second_opinion`` (and a ``fix`` model other than the ``code`` model), a failed first
attempt is not reviewed: the second attempt is the fix model's own answer to the first
prompt, blind to the failed candidate (unless it writes that candidate again: then the recap
shows it). Later attempts are reviewed and fixed.

This module holds the state machine and the retry rules; the steps it takes on a task (state,
generate, record, grade) are in :mod:`~swapos.pipeline.steps`, the checks before a grade and
the draws in :mod:`~swapos.pipeline.prechecks`, what makes two candidates the same in
:mod:`~swapos.pipeline.identity`, and what it needs from the Router in
:mod:`~swapos.pipeline.phase_runner`.
"""

from __future__ import annotations

from typing import NamedTuple

import anyio
import msgspec

from swapos.capsule.schema import (
    Capsule,
    Feedback,
    encode_capsule,
    with_artifact,
    with_feedback,
    with_plan,
    with_verdict,
)
from swapos.data.task import Task
from swapos.errors import SwapOSError
from swapos.models.profile import Profile
from swapos.pipeline.extract import ExtractResult, extract_code, extract_feedback, extract_plan
from swapos.pipeline.identity import candidate_identity, resample_seed
from swapos.pipeline.phase_runner import PhaseRunner
from swapos.pipeline.prechecks import vetted
from swapos.pipeline.prompts import Prompt
from swapos.pipeline.routing import route
from swapos.pipeline.steps import Answer, TaskState, decide, generate, grade_candidate


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
    cfg = profile.pipeline
    st = TaskState(task, selfchecks=cfg.selfcheck_retries if cfg.selfcheck else 0)
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
    task: Task, profile: Profile, runner: PhaseRunner, st: TaskState, max_attempts: int
) -> None:
    plan = route(task, profile)
    for text in plan.why:
        await decide(runner, st, "route", text)
    m = plan.models
    if plan.reason:
        upcoming = [m["code"], m["critic"], m["fix"]]
        out = await generate(runner, st, task, "reason", m["reason"], 0, upcoming)
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
            await decide(
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
        graded = await vetted(
            runner, st, task, plan, found, coder, attempt, upcoming, last=last, opinion=fresh
        )
        if graded is None:
            if st.error is not None:
                return
            continue  # sent back to the coder without a grade
        code, key = graded
        result = await grade_candidate(runner, st, task, code, key, attempt)
        if result.passed:
            st.passed_attempt = attempt
            return
        if last:
            return
        review_due = True  # the next fixer's review (a second opinion reads none)


async def _review(
    runner: PhaseRunner, st: TaskState, task: Task, m: dict[str, str], attempt: int
) -> bool:
    """The critic reviews the attempts up to ``attempt`` (the newest); its review goes into
    the capsule. False on error (``st.error`` says)."""
    review = await generate(runner, st, task, "critic", m["critic"], attempt, [m["fix"]])
    if review is None:
        return False
    text = extract_feedback(review.text)
    st.capsule = with_feedback(st.capsule, Feedback(attempt=attempt, source="critic", text=text))
    return True


async def _candidate(
    runner: PhaseRunner,
    st: TaskState,
    task: Task,
    model: str,
    attempt: int,
    *,
    upcoming: list[str],
    capsule: Capsule | None = None,
    other: str | None = None,
) -> tuple[ExtractResult, str, Prompt] | None:
    """Generate attempt ``attempt``'s code and add it to the capsule: the extracted code, its
    identity (:func:`candidate_identity`) and the prompt it answered; None on error. The
    prompt is built from ``capsule`` when given (what the model is shown), else from the
    task's.

    A candidate that repeats a failed one is generated again: by a chat model first in a
    recap (greedy), then ``resamples`` times at most sampling at ``resample_temperature`` with
    a seed recorded in the decision (in a recap too), then once by the ``other`` model
    (greedy; in a recap if it chats) when given; if it still repeats, it is recorded as failed
    with the attempt it repeats.
    """
    cfg = runner.profile.pipeline
    recap = await _chats(runner, model)
    tries = [_Try(model, None, recap=False)]
    tries += [_Try(model, None, recap=True)] if recap else []
    tries += [
        _Try(model, (cfg.resample_temperature, resample_seed(task.task_id, attempt, r)), recap)
        for r in range(cfg.resamples)
    ]
    if other is not None:
        tries.append(_Try(other, None, await _chats(runner, other), instead=True))
    out: Answer | None = None
    for i, now in enumerate(tries):
        out = await generate(
            runner, st, task, "code", now.model, attempt, upcoming,
            sampling=now.sampling, capsule=None if now.recap else capsule, recap=now.recap,
        )  # fmt: skip
        if out is None:
            return None
        code = extract_code(out.text, task=task)
        key = candidate_identity(code.code)
        repeats = st.failed.get(key) if code.how != "empty" else None
        if repeats is None:
            break
        if i + 1 == len(tries):
            tried = [
                *(["a recap"] if recap else []),
                f"{cfg.resamples} resamples",
                *([f"{other}'s answer"] if other is not None else []),
            ]
            await decide(
                runner, st, "code",
                f"attempt {attempt} repeats attempt {repeats} after {_listed(tried)}; "
                "not graded again",
            )  # fmt: skip
            break
        await decide(
            runner, st, "code", f"attempt {attempt} repeats attempt {repeats}: {tries[i + 1]}"
        )
    assert out is not None  # the loop ran at least once
    st.capsule = with_artifact(st.capsule, out.artifact(attempt, code.code))
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


class _Try(NamedTuple):
    """One try at an attempt's candidate: who answers, sampled how, shown what."""

    model: str
    sampling: tuple[float, int] | None  # (temperature, seed); None: the phase's own
    recap: bool  # asked afresh, shown the failed answers (a chat model only)
    instead: bool = False  # the other model, in place of the attempt's

    def __str__(self) -> str:
        if self.instead:
            how = f"asking {self.model} instead"
        elif self.sampling is not None:
            how = f"sampling again at temperature {self.sampling[0]:g} with seed {self.sampling[1]}"
        else:
            how = f"asking {self.model} again"
        return how + (" in a recap of the failed answers" if self.recap else "")


async def _chats(runner: PhaseRunner, model: str) -> bool:
    """``model`` is prompted as a chat (so it can be asked in a recap)."""
    try:
        return await runner.chat_format(model) is not None
    except SwapOSError:
        return False  # generate() says why the model is unusable


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
