"""The retry policy, rule by rule: synchronous, no event loop, no sandbox.

Each row of :data:`ROWS` plays a task through :func:`~swapos.policies.retry.advance`: the
answers to its steps (every record step is answered ``Done``), then the steps the last answer
leads to, up to the next step that needs an answer (or the end). The rows follow the rules of
the policy's docstring, in order; they compare values (what each decision's words are is
``tests/test_retry_text.py``'s), and together they fire every row of both machines
(``tests/test_retry_tables.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
import pytest

from swapos.policies.retry import (
    Action,
    Adopt,
    Broke,
    Checked,
    Decide,
    Done,
    Failed,
    Finish,
    Generate,
    Generated,
    Grade,
    Graded,
    Keep,
    LastFailed,
    NoAttemptLeft,
    Outcome,
    Passed,
    Price,
    Priced,
    Replace,
    Rules,
    SelfCheck,
    SendBack,
    Started,
    TaskState,
    advance,
    next_step,
    resample_seed,
)
from swapos.policies.retry_decisions import (
    Adopted,
    Again,
    AnySeen,
    Ask,
    BestDraw,
    Count,
    Defect,
    DrawsStopped,
    DrawVerdict,
    Examples,
    GradedAsIs,
    HeldBack,
    NoCode,
    NoProgress,
    NothingToCheck,
    OverSpent,
    Repeats,
    Routed,
    SecondOpinion,
    StartsFromBest,
    StillRepeats,
    Unchanged,
)
from swapos.policies.retry_steps import RECORDS
from swapos.policies.retry_tables import Transition

ONE = {"reason": "planner", "code": "coder", "fix": "coder"}
"""Roles with one coder (the fixer is the code model)."""
TWO = {**ONE, "fix": "fixer"}
"""Roles with a fixer of its own."""

A = Generated(key="A")  # a candidate (from a base model)
B = Generated(key="B")
A_CHAT = Generated(key="A", chat=True)  # the same code, from a chat model
STARTER = Generated(key="S")  # the task's starter code, unchanged
LACKS = "the candidate does not define `RingBuffer` at module level, ..."
DEFECTIVE = Generated(key="D", defect=LACKS)  # a candidate with a defect seen without a run
EMPTY = Generated(empty=True)
TEXT = Generated()  # a plan
FAIL = Graded(passed=False, tests_passed=0, tests_total=1)
PASS = Graded(passed=True, tests_passed=1, tests_total=1)
BAD = Checked(passed=False, tests_passed=0, tests_total=1, text="f(2) returned 3")
BAD2 = Checked(passed=False, tests_passed=0, tests_total=1, text="f(3) returned 1")
GOOD = Checked(passed=True, tests_passed=1, tests_total=1)
C = Generated(key="C")
NONE_OF_2 = Checked(passed=False, tests_passed=0, tests_total=2, text="g(1) returned 0; g(2)")
ONE_OF_2 = Checked(passed=False, tests_passed=1, tests_total=2, text="g(1) returned 0")
ONE_OF_2B = Checked(passed=False, tests_passed=1, tests_total=2, text="g(2) returned 9")
SEVEN = Graded(passed=False, tests_passed=7, tests_total=8)  # a candidate failing 1 of 8
THREE = Graded(passed=False, tests_passed=3, tests_total=8)  # ... failing 5 of 8
SAME_FAIL = Graded(passed=False, tests_passed=0, tests_total=1, failure="f1")  # one output
A100 = Generated(key="A", model="coder", tokens=100)  # a candidate of 100 tokens: 6 s
B100 = Generated(key="B", model="coder", tokens=100)


def seed(attempt: int, i: int) -> int:
    return resample_seed("t", attempt, i)


def drawn(attempt: int, i: int) -> tuple[float, int]:
    return (0.8, resample_seed("t:draw", attempt, i))


def code(model: str, prompt: Any, attempt: int, *upcoming: str, **kw: Any) -> Generate:
    return Generate(model=model, prompt=prompt, attempt=attempt, upcoming=upcoming, **kw)


class Played(msgspec.Struct):
    """What :func:`play` saw: the steps after the last answer, the state then, and every
    row the play fired."""

    after: list[Action | Finish]
    state: TaskState
    fired: set[Transition]


def play(
    answers: Iterable[Outcome],
    *,
    models: dict[str, str] = ONE,
    plan: bool = False,
    examples: bool = False,
    why: tuple[str, ...] = (),
    expects_pass: bool = False,
    wall_s: float = 0.0,
    **rules: Any,
) -> Played:
    """Start a task, answer its steps with ``answers`` (the task's wall at ``wall_s``
    throughout); the steps after the last answer, up to the next that waits for one (or
    :class:`Finish`), and the state then."""
    state = TaskState(rules=Rules(task_id="t", starter="S", **rules))
    outcome: Outcome = Started(plan_first=plan, models=models, why=why, examples=examples)
    pending = list(answers)
    after: list[Action | Finish] = []
    fired: set[Transition] = set()
    while True:
        state, step, moved = advance(state, outcome, expects_pass=expects_pass, wall_s=wall_s)
        fired.update(moved)
        after.append(step)
        if isinstance(step, RECORDS):
            outcome = Done()
            continue
        if isinstance(step, Finish) or not pending:
            return Played(after, state, fired)
        outcome = pending.pop(0)
        after = []


def said(decision: Any) -> Decide:
    return Decide(decision=decision)


OPINION = said(SecondOpinion(model="fixer"))


def repeats(attempt: int, of: int, model: str, prompt: str = "fix", **ask: Any) -> Decide:
    then = Ask(model=model, prompt=prompt, **ask)
    return said(Repeats(attempt=attempt, repeats=of, then=then))


def still(
    attempt: int, of: int, resamples: int, *, recap: bool = False, other: Any = None,
    unaffordable: bool = False,
) -> Decide:  # fmt: skip
    decision = StillRepeats(
        attempt=attempt, repeats=of, recap=recap, resamples=resamples, other=other,
        unaffordable=unaffordable,
    )  # fmt: skip
    return said(decision)


def held(seen: Any) -> Decide:
    return said(HeldBack(seen=seen))


def draw_said(
    attempt: int, i: int, of: int, seen: AnySeen, *, in_place: bool = False, taken: int = 0
) -> Decide:
    """Draw ``taken`` (default ``i``) of ``of``, with draw ``i``'s sampling."""
    return said(
        DrawVerdict(
            attempt=attempt,
            draw=taken or i,
            of=of,
            sampling=drawn(attempt, i),
            seen=seen,
            in_place=in_place,
        )
    )


def examples(passed: int, total: int) -> Examples:
    return Examples(count=Count(passed, total))


def graded(passed: int, total: int) -> Count:
    return Count(passed, total)


UNCHANGED = Unchanged()
UNCHANGED_TEXT = "the answer is solution.py unchanged, and the task asks for a change"
NOTHING = NothingToCheck()
AGAIN = Again()
DEFECT = Defect(text=LACKS)

# fmt: off
ROWS: list[tuple[str, dict[str, Any], list[Outcome], list[Action | Finish]]] = [
    # Plan
    ("the routing is recorded first", {"why": ("skip reason",)}, [], [
        said(Routed(text="skip reason")), code("coder", "first", 1, "coder"),
    ]),
    ("a task routed to plan asks the reason model first", {"plan": True}, [], [
        code("planner", "plan", 0, "coder", "coder"),
    ]),
    ("after the plan, attempt 1 answers the first prompt", {"plan": True}, [TEXT], [
        code("coder", "first", 1, "coder"),
    ]),
    ("a failed plan ends the task with its reason", {"plan": True}, [Failed(error="boom")], [
        Finish(ending=Broke(error="boom")),
    ]),
    ("a failed generation ends the task with its reason", {}, [Failed(error="boom")], [
        Finish(ending=Broke(error="boom")),
    ]),
    # Attempts
    ("no schedule when a graded candidate is expected to pass", {"expects_pass": True}, [], [
        code("coder", "first", 1),
    ]),
    ("no schedule on the last attempt", {"max_attempts": 1}, [], [code("coder", "first", 1)]),
    ("after attempt 1, a second opinion's fixer is scheduled",
     {"models": TWO, "second_opinion": True}, [], [
        code("coder", "first", 1, "fixer"),
    ]),
    ("after a failed grade the fixer fixes, reading the test output", {"models": TWO},
     [A, FAIL], [
        code("fixer", "fix", 2, "fixer"),
    ]),
    ("a failed grade on the last attempt ends the task", {"max_attempts": 1}, [A, FAIL], [
        Finish(ending=LastFailed(attempt=1)),
    ]),
    ("a passing grade ends the task", {}, [A, PASS], [Finish(ending=Passed(attempt=1))]),
    # Second opinion
    ("a failed attempt 1 is followed by a second opinion",
     {"models": TWO, "second_opinion": True}, [A, FAIL], [
        OPINION, code("fixer", "opinion", 2, "fixer"),
    ]),
    ("no second opinion when the fixer is the code model", {"second_opinion": True}, [A, FAIL], [
        code("coder", "fix", 2, "coder"),
    ]),
    ("a failed second opinion is fixed",
     {"models": TWO, "second_opinion": True}, [A, FAIL, B, FAIL], [
        code("fixer", "fix", 3),
    ]),
    ("a second opinion that repeats the failure is followed by the fixer",
     {"models": TWO, "second_opinion": True, "resamples": 0}, [A, FAIL, A], [
        still(2, 1, resamples=0),
        Keep(attempt=2, repeats=1),
        code("fixer", "fix", 3),
    ]),
    # Repeats
    ("a base model's repeat is resampled with a recorded seed", {}, [A, FAIL, A], [
        repeats(2, 1, "coder", sampling=(0.8, seed(2, 0))),
        code("coder", "fix", 2, "coder", sampling=(0.8, seed(2, 0))),
    ]),
    ("a chat model's repeat is asked for again in a recap", {}, [A, FAIL, A_CHAT], [
        repeats(2, 1, "coder", "recap"),
        code("coder", "recap", 2, "coder"),
    ]),
    ("a chat model's resamples are recaps too", {}, [A, FAIL, A_CHAT, A_CHAT], [
        repeats(2, 1, "coder", "recap", sampling=(0.8, seed(2, 0))),
        code("coder", "recap", 2, "coder", sampling=(0.8, seed(2, 0))),
    ]),
    ("a fixer that keeps repeating hands the attempt to the code model",
     {"models": TWO, "resamples": 0}, [A, FAIL, A], [
        repeats(2, 1, "coder", instead=True),
        code("coder", "fix", 2, "fixer"),
    ]),
    ("the code model is asked in a recap when it chats",
     {"models": TWO, "resamples": 0}, [A_CHAT, FAIL, A], [
        repeats(2, 1, "coder", "recap", instead=True),
        code("coder", "recap", 2, "fixer"),
    ]),
    ("a candidate that still repeats is not graded; the next attempt begins",
     {"max_attempts": 3, "resamples": 1}, [A, FAIL, A, A], [
        still(2, 1, resamples=1),
        Keep(attempt=2, repeats=1),
        code("coder", "fix", 3),
    ]),
    ("a chat fixer's repeats are listed: the recap, the resamples, the code model's answer",
     {"models": TWO, "max_attempts": 3, "resamples": 1}, [A, FAIL, A_CHAT, A_CHAT, A_CHAT, A], [
        still(2, 1, resamples=1, recap=True, other="coder"),
        Keep(attempt=2, repeats=1),
        code("fixer", "fix", 3),
    ]),
    ("a repeat on the last attempt ends the task",
     {"resamples": 0, "max_attempts": 2}, [A, FAIL, A], [
        still(2, 1, resamples=0),
        Keep(attempt=2, repeats=1),
        Finish(ending=NoAttemptLeft(attempt=2)),
    ]),
    ("an empty answer is never a repeat", {}, [EMPTY, FAIL, EMPTY], [
        Keep(attempt=2), said(NoCode()), Grade(attempt=2, run=False),
    ]),
    ("a failed retry ends the task with its reason", {}, [A, FAIL, Failed(error="boom")], [
        Finish(ending=Broke(error="boom")),
    ]),
    # Pre-grade checks
    ("a candidate with examples is checked before its grade", {"examples": True}, [A], [
        Keep(attempt=1), SelfCheck(attempt=1),
    ]),
    ("a candidate that passes its check is graded", {"examples": True}, [A, GOOD], [
        Grade(attempt=1),
    ]),
    ("no examples: graded unchecked", {}, [A], [Keep(attempt=1), Grade(attempt=1)]),
    ("an unchanged starter fails its check without running anything", {}, [STARTER], [
        Keep(attempt=1),
        held(UNCHANGED),
        SendBack(attempt=1, tests_passed=0, tests_total=1, text=UNCHANGED_TEXT),
        code("coder", "fix", 2, "coder"),
    ]),
    ("a candidate with a defect fails its check without running anything", {}, [DEFECTIVE], [
        Keep(attempt=1),
        held(DEFECT),
        SendBack(attempt=1, tests_passed=0, tests_total=1, text=LACKS),
        code("coder", "fix", 2, "coder"),
    ]),
    ("a defect is held before the examples are run", {"examples": True}, [DEFECTIVE], [
        Keep(attempt=1),
        held(DEFECT),
        SendBack(attempt=1, tests_passed=0, tests_total=1, text=LACKS),
        code("coder", "fix", 2, "coder"),
    ]),
    ("once the check budget is spent a candidate with a defect is graded",
     {"max_attempts": 3}, [DEFECTIVE, DEFECTIVE], [Keep(attempt=2), Grade(attempt=2)]),
    ("the last attempt's candidate with a defect is graded", {"max_attempts": 1}, [DEFECTIVE], [
        Keep(attempt=1), Grade(attempt=1),
    ]),
    ("once the check budget is spent an unchanged starter is graded",
     {"max_attempts": 3}, [STARTER, STARTER], [Keep(attempt=2), Grade(attempt=2)]),
    ("no check budget without selfcheck", {"selfcheck": False}, [STARTER], [
        Keep(attempt=1), Grade(attempt=1),
    ]),
    ("the last attempt's candidate is not checked", {"max_attempts": 1, "examples": True}, [A], [
        Keep(attempt=1), Grade(attempt=1),
    ]),
    ("an empty answer is not checked: it fails without running", {"examples": True}, [EMPTY], [
        Keep(attempt=1), said(NoCode()), Grade(attempt=1, run=False),
    ]),
    ("a candidate the checks sent back once is graded when it comes back",
     {"examples": True, "max_attempts": 3, "selfcheck_retries": 2}, [A, BAD, A], [
        Keep(attempt=2), Grade(attempt=2),
    ]),
    # Draws
    ("attempt 1's failed check draws from the same prompt, naming the draws after it",
     {"examples": True, "draws": 2}, [A, BAD], [
        code("coder", "draw", 1, "coder", "coder", sampling=drawn(1, 1), then=(drawn(1, 2),)),
    ]),
    ("without side_by_side a draw names no draw after it",
     {"examples": True, "draws": 2, "side_by_side": False}, [A, BAD], [
        code("coder", "draw", 1, "coder", "coder", sampling=drawn(1, 1)),
    ]),
    ("a draw that passes its check is graded in place of the candidate",
     {"examples": True, "draws": 2}, [A, BAD, B, GOOD], [
        draw_said(1, 1, 2, examples(1, 1), in_place=True),
        Replace(attempt=1),
        Grade(attempt=1),
    ]),
    ("a draw with nothing to check is graded in place", {"draws": 2}, [STARTER, B], [
        draw_said(1, 1, 2, NOTHING, in_place=True),
        Replace(attempt=1),
        Grade(attempt=1),
    ]),
    ("a draw that is the starter is not graded in place",
     {"draws": 2}, [DEFECTIVE, STARTER], [
        draw_said(1, 1, 2, UNCHANGED),
        code("coder", "draw", 1, "coder", "coder", sampling=drawn(1, 2)),
    ]),
    ("a draw with a defect is not graded in place, though there is nothing to check",
     {"draws": 2}, [STARTER, DEFECTIVE], [
        draw_said(1, 1, 2, DEFECT),
        code("coder", "draw", 1, "coder", "coder", sampling=drawn(1, 2)),
    ]),
    ("a candidate with a defect draws, and a draw without one is graded in its place",
     {"draws": 2}, [DEFECTIVE, B], [
        draw_said(1, 1, 2, NOTHING, in_place=True),
        Replace(attempt=1),
        Grade(attempt=1),
    ]),
    ("a draw with a defect is never the attempt's best draw",
     {"examples": True, "draws": 2}, [A, NONE_OF_2, DEFECTIVE, C, NONE_OF_2], [
        draw_said(1, 2, 2, examples(0, 2)),
        SendBack(attempt=1, tests_passed=0, tests_total=2, text="g(1) returned 0; g(2)"),
        code("coder", "fix", 2, "coder"),
    ]),
    ("a draw that repeats a rejected candidate is not checked",
     {"examples": True, "draws": 2}, [A, BAD, A], [
        draw_said(1, 1, 2, AGAIN),
        code("coder", "draw", 1, "coder", "coder", sampling=drawn(1, 2)),
    ]),
    ("a draw that finished before the one asked for is taken: its own seed is said, and "
     "the next draw is the first of those left",
     {"examples": True, "draws": 3}, [A, BAD, Generated(key="B", drew=drawn(1, 2)), BAD2], [
        draw_said(1, 2, 3, examples(0, 1), taken=1),
        code("coder", "draw", 1, "coder", "coder", sampling=drawn(1, 1), then=(drawn(1, 3),)),
    ]),
    ("draws taken out of order: the last is the one left",
     {"examples": True, "draws": 3},
     [A, BAD, Generated(key="B", drew=drawn(1, 3)), BAD2, Generated(key="C"), BAD], [
        draw_said(1, 1, 3, examples(0, 1), taken=2),
        code("coder", "draw", 1, "coder", "coder", sampling=drawn(1, 2)),
    ]),
    ("a failed draw ends the task with its reason",
     {"examples": True, "draws": 2}, [A, BAD, Failed(error="boom")], [
        Finish(ending=Broke(error="boom")),
    ]),
    # Sent back
    ("draws exhausted: the candidate goes back to the coder with its own check",
     {"examples": True, "draws": 1}, [A, BAD, B, BAD2], [
        draw_said(1, 1, 1, examples(0, 1)),
        SendBack(attempt=1, tests_passed=0, tests_total=1, text="f(2) returned 3"),
        code("coder", "fix", 2, "coder"),
    ]),
    ("the draw that passes the most examples, more than the candidate, goes back in its place",
     {"examples": True, "draws": 2}, [A, NONE_OF_2, B, ONE_OF_2, C, ONE_OF_2B], [
        draw_said(1, 2, 2, examples(1, 2)),
        said(BestDraw(attempt=1, draw=1, of=2, sampling=drawn(1, 1), count=Count(1, 2),
                      own=Count(0, 2))),
        Replace(attempt=1, key="B"),  # the first of the two that pass one
        SendBack(attempt=1, tests_passed=1, tests_total=2, text="g(1) returned 0"),
        code("coder", "fix", 2, "coder"),
    ]),
    ("a draw that passes no more examples than the candidate leaves it in place",
     {"examples": True, "draws": 1}, [A, ONE_OF_2, B, ONE_OF_2B], [
        draw_said(1, 1, 1, examples(1, 2)),
        SendBack(attempt=1, tests_passed=1, tests_total=2, text="g(1) returned 0"),
        code("coder", "fix", 2, "coder"),
    ]),
    ("a second opinion beyond the budget is graded with its best draw",
     {"models": TWO, "second_opinion": True, "draws": 1, "examples": True},
     [A, BAD, B, BAD2, C, NONE_OF_2, Generated(key="D"), ONE_OF_2], [
        draw_said(2, 1, 1, examples(1, 2)),
        said(BestDraw(attempt=2, draw=1, of=1, sampling=drawn(2, 1), count=Count(1, 2),
                      own=Count(0, 2))),
        Replace(attempt=2, key="D"),
        said(GradedAsIs(attempt=2, with_draw=True)),
        Grade(attempt=2),
    ]),
    ("a failed check goes back to the coder without a grade", {"examples": True}, [A, BAD], [
        SendBack(attempt=1, tests_passed=0, tests_total=1, text="f(2) returned 3"),
        code("coder", "fix", 2, "coder"),
    ]),
    ("once the budget is spent the next candidate is graded unchecked",
     {"examples": True, "max_attempts": 3}, [A, BAD, B], [
        Keep(attempt=2), Grade(attempt=2),
    ]),
    ("a second opinion is checked and drawn for whatever the budget",
     {"models": TWO, "second_opinion": True, "draws": 1}, [STARTER, STARTER, STARTER], [
        Keep(attempt=2),
        held(UNCHANGED),
        code("fixer", "draw", 2, "fixer", "fixer", sampling=drawn(2, 1)),
    ]),
    ("a second opinion none of whose draws passes is graded as it is once the budget is spent",
     {"models": TWO, "second_opinion": True, "draws": 1}, [STARTER] * 4, [
        draw_said(2, 1, 1, AGAIN),
        said(GradedAsIs(attempt=2, with_draw=False)),
        Grade(attempt=2),
    ]),
    # Grade
    ("an empty candidate fails without running", {"max_attempts": 1}, [EMPTY], [
        Keep(attempt=1), said(NoCode()), Grade(attempt=1, run=False),
    ]),
    ("a fix that fails just as the grade before it ends the task",
     {"stop_same_failure": True}, [A, SAME_FAIL, B, SAME_FAIL], [
        Finish(ending=NoProgress(attempt=2, same_as=1)),
    ]),
    ("a fix that fails differently goes on", {"stop_same_failure": True},
     [A, SAME_FAIL, B, FAIL], [
        code("coder", "fix", 3),
    ]),
    # Spend
    ("an attempt that does not fit the spend limit ends the task",
     {"task_budget": 1.5}, [A100, FAIL], [
        Finish(ending=OverSpent(attempt=1, spent=6000.0, expected=6000.0, limit=9000.0)),
    ]),
    ("an attempt that fits the spend limit is priced by its prompt",
     {"task_budget": 2.0}, [A100, FAIL], [
        Price(step=code("coder", "fix", 2, "coder")),
    ]),
    ("an attempt whose prompt fits the spend limit too is asked",
     {"task_budget": 2.0}, [A100, FAIL, Priced(prefill=0)], [
        code("coder", "fix", 2, "coder"),
    ]),
    ("a prompt that cannot be built for its price ends the task with the reason",
     {"task_budget": 2.0}, [A100, FAIL, Failed(error="boom")], [
        Finish(ending=Broke(error="boom")),
    ]),
    ("without price_attempts an attempt is asked unpriced",
     {"task_budget": 2.0, "price_attempts": False}, [A100, FAIL], [
        code("coder", "fix", 2, "coder"),
    ]),
    ("an attempt whose prompt would cost too much to read is not asked",
     {"task_budget": 2.0}, [A100, FAIL, Priced(prefill=1600)], [
        Finish(ending=OverSpent(attempt=1, spent=6000.0, expected=12000.0, limit=12000.0)),
    ]),
    ("a repeat whose tries do not fit the spend limit lists none of them",
     {"task_seconds": 15.0, "price_attempts": False}, [A100, FAIL, A100], [
        still(2, 1, resamples=0, unaffordable=True),
        Keep(attempt=2, repeats=1),
        Finish(ending=OverSpent(attempt=2, spent=12000.0, expected=6000.0, limit=15000.0)),
    ]),
    ("a limit in seconds holds too", {"task_seconds": 10.0}, [A100, FAIL], [
        Finish(ending=OverSpent(attempt=1, spent=6000.0, expected=6000.0, limit=10000.0)),
    ]),
    ("the task's wall is what it spent where that is more than its answers' cost",
     {"task_seconds": 15.0, "wall_s": 10.0}, [A100, FAIL], [
        Finish(ending=OverSpent(attempt=1, spent=10000.0, expected=6000.0, limit=15000.0)),
    ]),
    ("without count_wall its answers' cost alone is spent",
     {"task_seconds": 15.0, "wall_s": 10.0, "count_wall": False}, [A100, FAIL], [
        Price(step=code("coder", "fix", 2, "coder")),
    ]),
    ("a wall below the answers' cost changes nothing",
     {"task_seconds": 15.0, "wall_s": 3.0}, [A100, FAIL], [
        Price(step=code("coder", "fix", 2, "coder")),
    ]),
    ("a draw that does not fit stops the draws, and the attempt goes back",
     {"examples": True, "draws": 2, "task_budget": 1.5}, [A100, BAD], [
        said(DrawsStopped(attempt=1, drawn=0, of=2, why="spent", spent=6000.0,
                          expected=6000.0, limit=9000.0)),
        SendBack(attempt=1, tests_passed=0, tests_total=1, text="f(2) returned 3"),
        Finish(ending=OverSpent(attempt=1, spent=6000.0, expected=6000.0, limit=9000.0)),
    ]),
    ("an attempt's draws stop once they would cost more than its draw limit",
     {"examples": True, "draws": 3, "draw_seconds": 10.0}, [A100, BAD, B100, BAD2], [
        draw_said(1, 1, 3, examples(0, 1)),
        said(DrawsStopped(attempt=1, drawn=1, of=3, why="draws", spent=6000.0,
                          expected=6000.0, limit=10000.0)),
        SendBack(attempt=1, tests_passed=0, tests_total=1, text="f(2) returned 3"),
        code("coder", "fix", 2, "coder"),
    ]),
    ("a draw that would eat the next attempt's first answer stops the draws",
     {"examples": True, "draws": 3, "task_seconds": 15.0, "reserve_next": True}, [A100, BAD], [
        said(DrawsStopped(attempt=1, drawn=0, of=3, why="reserved", spent=6000.0,
                          expected=6000.0, limit=15000.0, reserved=6000.0)),
        SendBack(attempt=1, tests_passed=0, tests_total=1, text="f(2) returned 3"),
        Price(step=code("coder", "fix", 2, "coder")),
    ]),
    ("without the reserve that draw is asked",
     {"examples": True, "draws": 3, "task_seconds": 15.0}, [A100, BAD], [
        code("coder", "draw", 1, "coder", "coder", sampling=drawn(1, 1),
             then=(drawn(1, 2), drawn(1, 3))),
    ]),
    ("draws stop once so many in a row bring nothing new",
     {"examples": True, "draws": 3, "stale_draws": 1}, [A, BAD, EMPTY], [
        draw_said(1, 1, 3, AGAIN),
        said(DrawsStopped(attempt=1, drawn=1, of=3, why="stale", stale=1)),
        SendBack(attempt=1, tests_passed=0, tests_total=1, text="f(2) returned 3"),
        code("coder", "fix", 2, "coder"),
    ]),
    # Best candidate
    ("a fixer starts from the best candidate when a newer graded one is worse",
     {}, [A, SEVEN, B, THREE], [
        said(StartsFromBest(attempt=3, best=1, best_grade=graded(7, 8), newest=2,
                            newest_grade=graded(3, 8))),
        code("coder", "fix", 3, base=1),
    ]),
    ("a tie goes to the newest candidate", {}, [A, THREE, B, THREE], [
        code("coder", "fix", 3),
    ]),
    ("a repeat's tries start from the best candidate too",
     {}, [A, SEVEN, B, THREE, B], [
        repeats(3, 2, "coder", sampling=(0.8, seed(3, 0))),
        code("coder", "fix", 3, sampling=(0.8, seed(3, 0)), base=1),
    ]),
    ("the task ends on its best candidate", {"max_attempts": 2}, [A, SEVEN, B, THREE], [
        said(Adopted(best=1, grade=graded(7, 8), newest=2)),
        Adopt(attempt=1),
        Finish(ending=LastFailed(attempt=2)),
    ]),
    ("an empty answer is never the best candidate",
     {"max_attempts": 2}, [A, THREE, EMPTY, FAIL], [
        said(Adopted(best=1, grade=graded(3, 8), newest=2)),
        Adopt(attempt=1),
        Finish(ending=LastFailed(attempt=2)),
    ]),
    ("the newest candidate, best, is the result as it is",
     {"max_attempts": 2}, [A, THREE, B, SEVEN], [
        Finish(ending=LastFailed(attempt=2)),
    ]),
    ("a task that ends on a repeat of its best candidate adopts nothing",
     {"max_attempts": 2, "resamples": 0}, [A, SEVEN, A], [
        still(2, 1, resamples=0),
        Keep(attempt=2, repeats=1),
        Finish(ending=NoAttemptLeft(attempt=2)),
    ]),
]
# fmt: on


@pytest.mark.parametrize(("rule", "setting", "answers", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_each_rule_leads_to_its_step(
    rule: str, setting: dict[str, Any], answers: list[Outcome], expected: list[Action | Finish]
) -> None:
    assert play(answers, **setting).after == expected, rule


def test_an_attempt_refused_by_its_price_is_not_counted() -> None:
    state = play([A100, FAIL, Priced(prefill=1600)], task_budget=2.0).state
    assert state.attempt == 1 and isinstance(state.ending, OverSpent)


def test_the_outcome_counts_grades_not_empty_answers() -> None:
    state = play([EMPTY, FAIL, A, PASS], max_attempts=3).state
    assert state.passed and state.pass_at_1 and (state.grades, state.passed_attempt) == (1, 2)
    assert state.attempt == 2 and state.last == PASS


def test_the_result_is_the_best_candidates_grade() -> None:
    state = play([A, SEVEN, B, THREE], max_attempts=2).state
    assert state.result == SEVEN and state.last == THREE and state.best_attempt == 1
    passed = play([A, SEVEN, B, PASS], max_attempts=2).state
    assert passed.result == PASS and passed.passed


def test_a_grade_is_counted_when_it_is_asked_for() -> None:
    # A task cancelled while its grade runs records the grade it spent.
    played = play([A])
    assert played.after[-1] == Grade(attempt=1) and played.state.grades == 1
    assert not played.state.passed


def test_a_failed_generation_is_the_tasks_error() -> None:
    state = play([A, FAIL, Failed(error="code phase failed: boom")]).state
    assert state.error == "code phase failed: boom" and not state.passed


def test_a_pass_after_a_failed_generation_is_no_pass() -> None:
    state = msgspec.structs.replace(TaskState(rules=Rules(task_id="t", max_attempts=1)), last=PASS)
    assert state.passed and not msgspec.structs.replace(state, error="x").passed


def test_an_outcome_that_does_not_answer_the_step_is_a_bug() -> None:
    state, step = next_step(
        TaskState(rules=Rules(task_id="t", max_attempts=1)),
        Started(plan_first=False, models=ONE),
        expects_pass=False,
    )
    assert isinstance(step, Generate)
    with pytest.raises(TypeError, match="waits for Generated"):
        next_step(state, PASS, expects_pass=False)


def test_a_record_step_is_answered_by_done_and_a_finished_task_by_nothing() -> None:
    state = play([A, FAIL], resamples=0, max_attempts=2).state
    state, step = next_step(state, A, expects_pass=False)  # a repeat: two records
    assert isinstance(step, Decide) and state.pending == (Keep(attempt=2, repeats=1),)
    with pytest.raises(TypeError, match="waits for Done"):
        next_step(state, FAIL, expects_pass=False)
    finished = play([A, PASS]).state
    with pytest.raises(TypeError, match="the task has finished"):
        next_step(finished, Done(), expects_pass=False)


def test_a_draw_answered_with_a_draw_already_taken_is_a_bug() -> None:
    played = play([A, BAD], examples=True, draws=3)
    assert isinstance(played.after[-1], Generate)
    state, _ = next_step(played.state, Generated(key="B", drew=drawn(1, 2)), expects_pass=False)
    state, _ = next_step(state, BAD2, expects_pass=False)
    state, _ = next_step(state, Done(), expects_pass=False)  # its verdict, recorded
    with pytest.raises(ValueError, match="not one of the draws left"):
        next_step(state, Generated(key="C", drew=drawn(1, 2)), expects_pass=False)


def test_the_state_is_frozen() -> None:
    state = TaskState(rules=Rules(task_id="t", max_attempts=1))
    with pytest.raises(AttributeError):
        state.attempt = 2  # type: ignore[misc]


def test_the_seeds_are_reproducible_and_distinct() -> None:
    assert resample_seed("t", 2, 0) == resample_seed("t", 2, 0)
    assert len({resample_seed("t", a, i) for a in (1, 2) for i in range(3)}) == 6
