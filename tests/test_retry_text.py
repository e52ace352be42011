"""The retry policy's decisions in words: what the event log and the capsule say of each
decision value (the words runs recorded before the decisions were values)."""

from __future__ import annotations

import pytest

from swapos.policies.retry_decisions import (
    Adopted,
    Again,
    AnyDecision,
    AnyEnding,
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
    SecondOpinion,
    StartsFromBest,
    StillRepeats,
    Unchanged,
)
from swapos.policies.retry_text import NO_CODE, UNCHANGED, ended, identical, said

DRAW = (0.8, 1234)
SEED = "temperature 0.8 with seed 1234"

# fmt: off
WORDS: list[tuple[AnyDecision, str, str]] = [
    (Routed(text="skip reason: completion task"), "route", "skip reason: completion task"),
    (SecondOpinion(model="large"), "code",
     "attempt 2 is a second opinion: large answers the first prompt afresh, without the "
     "failed candidate"),
    (StartsFromBest(attempt=3, best=1, best_grade=Count(7, 8), newest=2,
                    newest_grade=Count(3, 8)), "code",
     "attempt 3 starts from attempt 1's candidate (7/8 tests passed), the best graded, not "
     "from attempt 2's (3/8 tests passed)"),
    (Repeats(attempt=2, repeats=1, then=Ask(model="small", prompt="fix", sampling=DRAW)),
     "code", f"attempt 2 repeats attempt 1: sampling again at {SEED}"),
    (Repeats(attempt=2, repeats=1, then=Ask(model="small", prompt="recap")), "code",
     "attempt 2 repeats attempt 1: asking small again in a recap of the failed answers"),
    (Repeats(attempt=2, repeats=1, then=Ask(model="small", prompt="recap", sampling=DRAW)),
     "code",
     f"attempt 2 repeats attempt 1: sampling again at {SEED} in a recap of the failed answers"),
    (Repeats(attempt=2, repeats=1, then=Ask(model="small", prompt="fix", instead=True)),
     "code", "attempt 2 repeats attempt 1: asking small instead"),
    (StillRepeats(attempt=2, repeats=1, recap=False, resamples=0, other=None), "code",
     "attempt 2 repeats attempt 1 after 0 resamples; not graded again"),
    (StillRepeats(attempt=2, repeats=1, recap=False, resamples=0, other=None,
                  unaffordable=True), "code",
     "attempt 2 repeats attempt 1 after 0 resamples (the spend limit affords no other try); "
     "not graded again"),
    (StillRepeats(attempt=2, repeats=1, recap=True, resamples=1, other="small"), "code",
     "attempt 2 repeats attempt 1 after a recap, 1 resamples and small's answer; not graded "
     "again"),
    (HeldBack(seen=Unchanged()), "selfcheck", UNCHANGED),
    (HeldBack(seen=Defect(text="the candidate does not define `Ring`")), "selfcheck",
     "the candidate does not define `Ring`"),
    (DrawVerdict(attempt=1, draw=1, of=2, sampling=DRAW, seen=Examples(count=Count(1, 1)),
                 in_place=True), "code",
     f"draw 1 of 2 at {SEED}: 1/1 examples pass; graded in place of attempt 1's candidate"),
    (DrawVerdict(attempt=1, draw=1, of=2, sampling=DRAW, seen=NothingToCheck(), in_place=True),
     "code", f"draw 1 of 2 at {SEED}: nothing to check; graded in place of attempt 1's "
     "candidate"),
    (DrawVerdict(attempt=1, draw=2, of=6, sampling=DRAW, seen=Again()), "code",
     f"draw 2 of 6 at {SEED}: empty or a rejected candidate again"),
    (DrawVerdict(attempt=1, draw=2, of=6, sampling=DRAW, seen=Unchanged()), "code",
     f"draw 2 of 6 at {SEED}: solution.py unchanged"),
    (DrawVerdict(attempt=1, draw=2, of=6, sampling=DRAW, seen=Defect(text="it lacks `f`")),
     "code", f"draw 2 of 6 at {SEED}: it lacks `f`"),
    (DrawVerdict(attempt=2, draw=3, of=6, sampling=DRAW, seen=Examples(count=Count(0, 2))),
     "code", f"draw 3 of 6 at {SEED}: 0/2 examples pass"),
    (BestDraw(attempt=1, draw=1, of=2, sampling=DRAW, count=Count(1, 2), own=Count(0, 2)),
     "code", f"draw 1 of 2 at {SEED} passed 1/2 examples, more than attempt 1's candidate "
     "(0/2): it takes its place"),
    (GradedAsIs(attempt=2, with_draw=True), "code",
     "no draw passes the checks: attempt 2 is graded with that draw"),
    (GradedAsIs(attempt=2, with_draw=False), "code",
     "no draw passes the checks: attempt 2 is graded as it is"),
    (DrawsStopped(attempt=1, drawn=2, of=6, why="stale", stale=2), "code",
     "attempt 1's draws stop after 2 of 6: the last 2 brought nothing new"),
    (DrawsStopped(attempt=2, drawn=1, of=6, why="spent", spent=90_000.0, expected=31_000.0,
                  limit=100_000.0), "code",
     "attempt 2's draws stop after 1 of 6: the next is expected to take 31.0 s more, and "
     "90.0 s of the task's 100.0 s is spent"),
    (DrawsStopped(attempt=1, drawn=3, of=6, why="draws", spent=54_000.0, expected=18_000.0,
                  limit=60_000.0), "code",
     "attempt 1's draws stop after 3 of 6: the next is expected to take 18.0 s more, and "
     "54.0 s of its draws' 60.0 s is spent"),
    (NoCode(), "grade", NO_CODE),
    (Adopted(best=1, grade=Count(7, 8), newest=3), "grade",
     "the task's result is attempt 1's candidate (7/8 tests passed), its best graded, not "
     "attempt 3's"),
]
# fmt: on


@pytest.mark.parametrize(
    ("decision", "phase", "words"), WORDS, ids=[type(w[0]).__name__ for w in WORDS]
)
def test_each_decision_is_recorded_in_its_words_under_its_phase(
    decision: AnyDecision, phase: str, words: str
) -> None:
    assert (decision.phase, said(decision)) == (phase, words)


ENDINGS: list[tuple[AnyEnding, str]] = [
    (Passed(attempt=1), "attempt 1 passed"),
    (LastFailed(attempt=3), "attempt 3, the last, failed"),
    (NoAttemptLeft(attempt=2), "attempt 2 was the last"),
    (
        OverSpent(attempt=2, spent=90_000.0, expected=31_000.0, limit=100_000.0),
        "attempt 2 was the last the task could afford: another is expected to take 31.0 s "
        "more, and 90.0 s of its 100.0 s is spent",
    ),
    (
        NoProgress(attempt=3, same_as=2),
        "attempt 3's fix failed the same tests as attempt 2, in the same way: the fixes find "
        "nothing new",
    ),
    (Broke(error="code phase failed: boom"), "code phase failed: boom"),
]


@pytest.mark.parametrize(("ending", "words"), ENDINGS)
def test_each_ending_says_why(ending: AnyEnding, words: str) -> None:
    assert ended(ending) == words


def test_a_repeat_is_recorded_as_identical_to_the_failed_attempt() -> None:
    assert identical(1) == "Identical to attempt 1, which failed; not graded again."


def test_every_kind_of_decision_has_its_words() -> None:
    assert {type(d) for d, _, _ in WORDS} == set(AnyDecision.__args__)  # type: ignore[attr-defined]
