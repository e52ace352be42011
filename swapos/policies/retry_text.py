"""The retry policy's decisions in words: what the event log and the capsule say of each
:mod:`~swapos.policies.retry_decisions` value. Pure; the conductor renders a decision here
when it records it, and tests of the rules compare the values, not these words."""

from __future__ import annotations

from typing import Final, assert_never

from swapos.policies.retry_decisions import (
    Adopted,
    Again,
    AnyDecision,
    AnyEnding,
    AnySeen,
    Ask,
    BestDraw,
    Broke,
    Count,
    Defect,
    DrawsStopped,
    DrawVerdict,
    Examples,
    GradedAsIs,
    HeldBack,
    LastFailed,
    NoAttemptLeft,
    NoCode,
    NoProgress,
    NothingToCheck,
    OverSpent,
    Passed,
    Repeats,
    Routed,
    Sampling,
    SecondOpinion,
    StartsFromBest,
    StillRepeats,
    Unchanged,
)

UNCHANGED: Final = "the answer is solution.py unchanged, and the task asks for a change"
"""The verdict on a repository task's candidate that is its starter code."""
NO_CODE: Final = "the model produced no code (empty or prose-only answer)"
"""The verdict on an empty answer (not run)."""


def said(decision: AnyDecision) -> str:
    """``decision`` in words."""
    match decision:
        case Routed(text=text):
            return text
        case SecondOpinion(model=model):
            return (
                f"attempt 2 is a second opinion: {model} answers the first prompt afresh, "
                "without the failed candidate"
            )
        case StartsFromBest():
            return _starts_from_best(decision)
        case Repeats(attempt=attempt, repeats=repeats, then=then):
            return f"attempt {attempt} repeats attempt {repeats}: {asked(then)}"
        case StillRepeats():
            return _still_repeats(decision)
        case HeldBack(seen=seen):
            return seen.text if isinstance(seen, Defect) else UNCHANGED
        case DrawVerdict():
            return _draw_verdict(decision)
        case BestDraw():
            return _best_draw(decision)
        case DrawsStopped():
            return _draws_stopped(decision)
        case GradedAsIs(attempt=attempt, with_draw=with_draw):
            how = "with that draw" if with_draw else "as it is"
            return f"no draw passes the checks: attempt {attempt} is graded {how}"
        case NoCode():
            return NO_CODE
        case Adopted(best=best, grade=grade, newest=newest):
            return (
                f"the task's result is attempt {best}'s candidate ({_tests(grade)}), its best "
                f"graded, not attempt {newest}'s"
            )
        case _:
            assert_never(decision)


def ended(ending: AnyEnding) -> str:
    """Why a task ended, in words."""
    match ending:
        case Passed(attempt=attempt):
            return f"attempt {attempt} passed"
        case LastFailed(attempt=attempt):
            return f"attempt {attempt}, the last, failed"
        case NoAttemptLeft(attempt=attempt):
            return f"attempt {attempt} was the last"
        case OverSpent(attempt=attempt, spent=spent, expected=expected, limit=limit):
            return (
                f"attempt {attempt} was the last the task could afford: another is expected "
                f"to take {expected / 1000:.1f} s more, and {spent / 1000:.1f} s of its "
                f"{limit / 1000:.1f} s is spent"
            )
        case NoProgress(attempt=attempt, same_as=same_as):
            return (
                f"attempt {attempt}'s fix failed the same tests as attempt {same_as}, in the "
                "same way: the fixes find nothing new"
            )
        case Broke(error=error):
            return error
        case _:
            assert_never(ending)


def _draws_stopped(d: DrawsStopped) -> str:
    if d.why == "stale":
        return (
            f"attempt {d.attempt}'s draws stop after {d.drawn} of {d.of}: the last {d.stale} "
            "brought nothing new"
        )
    if d.why == "reserved":
        return (
            f"attempt {d.attempt}'s draws stop after {d.drawn} of {d.of}: the next is expected "
            f"to take {d.expected / 1000:.1f} s more, and of the task's {d.limit / 1000:.1f} s, "
            f"{d.spent / 1000:.1f} s is spent and {d.reserved / 1000:.1f} s is kept for attempt "
            f"{d.attempt + 1}'s first answer"
        )
    whose = "its draws'" if d.why == "draws" else "the task's"
    return (
        f"attempt {d.attempt}'s draws stop after {d.drawn} of {d.of}: the next is expected to "
        f"take {d.expected / 1000:.1f} s more, and {d.spent / 1000:.1f} s of {whose} "
        f"{d.limit / 1000:.1f} s is spent"
    )


def identical(attempt: int) -> str:
    """The verdict on a candidate that repeats attempt ``attempt``'s failed one."""
    return f"Identical to attempt {attempt}, which failed; not graded again."


def asked(ask: Ask) -> str:
    """How a try at a candidate is asked: ``sampling again at temperature 0.8 with seed 7 in
    a recap of the failed answers``."""
    if ask.instead:
        how = f"asking {ask.model} instead"
    elif ask.sampling is not None:
        how = f"sampling again at temperature {ask.sampling[0]:g} with seed {ask.sampling[1]}"
    else:
        how = f"asking {ask.model} again"
    return how + (" in a recap of the failed answers" if ask.prompt == "recap" else "")


def _starts_from_best(d: StartsFromBest) -> str:
    return (
        f"attempt {d.attempt} starts from attempt {d.best}'s candidate ({_tests(d.best_grade)}), "
        f"the best graded, not from attempt {d.newest}'s ({_tests(d.newest_grade)})"
    )


def _best_draw(d: BestDraw) -> str:
    return (
        f"{_draw(d.draw, d.of, d.sampling)} passed {d.count.passed}/{d.count.total} examples, "
        f"more than attempt {d.attempt}'s candidate ({d.own.passed}/{d.own.total}): it takes "
        "its place"
    )


def _still_repeats(d: StillRepeats) -> str:
    tried = [
        *(["a recap"] if d.recap else []),
        f"{d.resamples} resamples",
        *([f"{d.other}'s answer"] if d.other is not None else []),
    ]
    listed = tried[0] if len(tried) == 1 else ", ".join(tried[:-1]) + " and " + tried[-1]
    short = " (the spend limit affords no other try)" if d.unaffordable else ""
    return (
        f"attempt {d.attempt} repeats attempt {d.repeats} after {listed}{short}; not graded again"
    )


def _draw(draw: int, of: int, sampling: Sampling) -> str:
    return f"draw {draw} of {of} at temperature {sampling[0]:g} with seed {sampling[1]}"


def _draw_verdict(d: DrawVerdict) -> str:
    text = f"{_draw(d.draw, d.of, d.sampling)}: {_seen(d.seen)}"
    return f"{text}; graded in place of attempt {d.attempt}'s candidate" if d.in_place else text


def _seen(seen: AnySeen) -> str:
    match seen:
        case Again():
            return "empty or a rejected candidate again"
        case NothingToCheck():
            return "nothing to check"
        case Unchanged():
            return "solution.py unchanged"
        case Defect(text=text):
            return text
        case Examples(count=count):
            return f"{count.passed}/{count.total} examples pass"
        case _:
            assert_never(seen)


def _tests(count: Count) -> str:
    return f"{count.passed}/{count.total} tests passed"
