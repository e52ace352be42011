"""The attempt machine's guards and actions of its draws and of what follows when none
passes, by the names its rows give them (:data:`swapos.policies.retry_tables.ATTEMPT`).
Pure; the rules (*Draws*, *Sent back*) are written in :mod:`swapos.policies.retry`'s
docstring."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from swapos.policies.retry_attempt import draws_on, replace_now
from swapos.policies.retry_decisions import (
    Again,
    AnySeen,
    BestDraw,
    Count,
    Defect,
    DrawsStopped,
    DrawVerdict,
    Examples,
    GradedAsIs,
    NothingToCheck,
    Sampling,
    Unchanged,
)
from swapos.policies.retry_state import BestDraw as Best
from swapos.policies.retry_state import Candidate, TaskState
from swapos.policies.retry_steps import (
    Checked,
    Decide,
    Generate,
    Generated,
    Outcome,
    Replace,
    SelfCheck,
    SendBack,
    resample_seed,
)
from swapos.policies.retry_task import (
    Effect,
    Guard,
    Moved,
    affords,
    expect,
    limit_of,
    next_coder,
    replace,
)
from swapos.policies.spending import affordable


def _sampling(st: TaskState, i: int) -> Sampling:
    """Draw ``i``'s ``(temperature, seed)`` in this attempt."""
    r = st.rules
    return (r.resample_temperature, resample_seed(f"{r.task_id}:draw", st.attempt, i))


def _untaken(st: TaskState) -> list[Sampling]:
    """The samplings of the attempt's draws not taken yet, in order."""
    every = (_sampling(st, j) for j in range(1, st.rules.draws + 1))
    return [s for s in every if s not in st.now.draws.taken]


def _count_left(st: TaskState) -> bool:
    return draws_on(st) and len(st.now.draws.taken) < st.rules.draws


def _stale(st: TaskState) -> bool:
    return 0 < st.rules.stale_draws <= st.now.draws.stale


def _draws_fit(st: TaskState) -> bool:
    """The next draw fits the attempt's draw limit (``draw_seconds``; none: it fits)."""
    limit = st.rules.draw_seconds * 1000
    expected = st.now.spend.expected(st.rules.cost_of(st.now.coder))
    return limit <= 0 or st.now.draws.spent + expected <= limit


def _reserve(st: TaskState) -> float:
    """What the next attempt's first answer is expected to cost at its model's costs, kept
    out of this attempt's draws (``reserve_next``; 0: off, or this is the last attempt)."""
    if not st.rules.reserve_next or st.attempt >= st.rules.max_attempts:
        return 0.0
    return affords(st, next_coder(st), st.code_spend)[1]  # what the attempt gate expects


def _task_fits(st: TaskState) -> bool:
    """The next draw fits the task's spend limit, with the next attempt's reserve kept."""
    expected = affords(st, st.now.coder, st.now.spend)[1]
    return affordable(spent=st.spent, expected=expected + _reserve(st), limit=limit_of(st))


def draws_left(st: TaskState, _: Outcome) -> bool:
    return _count_left(st) and not _stale(st) and _draws_fit(st) and _task_fits(st)


def draws_stop(st: TaskState, _: Outcome) -> bool:
    """Draws are left by count, but they stop: the last ones brought nothing new, or the
    next does not fit the spend limit (*Draws*, *Spend*)."""
    return _count_left(st) and not draws_left(st, _)


def stop_draws(st: TaskState, _: Outcome, __: bool) -> Moved:
    now, r = st.now, st.rules
    expected = affords(st, now.coder, now.spend)[1]
    base = DrawsStopped(
        attempt=st.attempt, drawn=len(now.draws.taken), of=r.draws, why="stale",
        stale=now.draws.stale, expected=expected,
    )  # fmt: skip
    if _stale(st):
        said = base
    elif not _draws_fit(st):
        said = msgspec.structs.replace(
            base, why="draws", spent=now.draws.spent, limit=r.draw_seconds * 1000
        )
    elif affords(st, now.coder, now.spend)[0]:  # it would fit but for the reserve
        said = msgspec.structs.replace(
            base, why="reserved", spent=st.spent, limit=limit_of(st), reserved=_reserve(st)
        )
    else:
        said = msgspec.structs.replace(base, why="spent", spent=st.spent, limit=limit_of(st))
    return st, [Decide(decision=said)]


def draw(st: TaskState, _: Outcome, __: bool) -> Moved:
    """Draw from the very prompt the candidate answered; the step names the draws that may
    follow it when the profile lets them decode side by side."""
    now = st.now
    first, *rest = _untaken(st)
    then = tuple(rest) if st.rules.side_by_side else ()
    step = Generate(
        model=now.coder, prompt="draw", attempt=st.attempt, upcoming=(now.coder, *now.upcoming),
        sampling=first, then=then,
    )  # fmt: skip
    return st, [step]


def _took(st: TaskState, out: Outcome, *, new: bool = True) -> TaskState:
    """The state once the draw ``out`` answered is taken (the one it names, or the first
    left); ``new``: it is a candidate not seen before (else the draws' stale run grows).

    Raises:
        ValueError: it names a draw already taken (a bug in the runner).
    """
    o = expect(out, Generated)
    untaken = _untaken(st)
    if o.drew is not None and o.drew not in untaken:
        raise ValueError(f"a draw answered with {o.drew}, not one of the draws left: {untaken}")
    d = st.now.draws
    taken = msgspec.structs.replace(
        d, taken=(*d.taken, o.drew or untaken[0]), newest=o.key, stale=0 if new else d.stale + 1
    )
    return replace(st, current=replace_now(st, draws=taken))


def _verdict(st: TaskState, seen: AnySeen, *, in_place: bool = False) -> Decide:
    d = st.now.draws
    said = DrawVerdict(
        attempt=st.attempt, draw=len(d.taken), of=st.rules.draws, sampling=d.taken[-1],
        seen=seen, in_place=in_place,
    )  # fmt: skip
    return Decide(decision=said)


def drew_again(st: TaskState, out: Outcome) -> bool:
    """The draw is empty or a rejected candidate again: it is not checked."""
    o = expect(out, Generated)
    return o.empty or o.key in st.failed or o.key in st.unchecked


def drew_unchanged(st: TaskState, out: Outcome) -> bool:
    return expect(out, Generated).key == st.rules.starter


def drew_defect(st: TaskState, out: Outcome) -> bool:
    return bool(expect(out, Generated).defect)


def draw_again(st: TaskState, out: Outcome, _: bool) -> Moved:
    st = _took(st, out, new=False)
    return st, [_verdict(st, Again())]


def draw_unchanged(st: TaskState, out: Outcome, _: bool) -> Moved:
    st = _rejected(_took(st, out, new=False))
    return st, [_verdict(st, Unchanged())]


def draw_defect(st: TaskState, out: Outcome, _: bool) -> Moved:
    st = _rejected(_took(st, out))
    return st, [_verdict(st, Defect(text=expect(out, Generated).defect))]


def check_draw(st: TaskState, out: Outcome, _: bool) -> Moved:
    st = _took(st, out)
    return st, [SelfCheck(attempt=st.attempt)]


def draw_unchecked_in_place(st: TaskState, out: Outcome, _: bool) -> Moved:
    return _in_place(_took(st, out), NothingToCheck())


def draw_in_place(st: TaskState, out: Outcome, _: bool) -> Moved:
    o = expect(out, Checked)
    return _in_place(st, Examples(count=Count(o.tests_passed, o.tests_total)))


def _in_place(st: TaskState, seen: AnySeen) -> Moved:
    """The draw passed: it is graded in place of the attempt's candidate."""
    said = _verdict(st, seen, in_place=True)
    st = replace(st, candidate=Candidate(key=st.now.draws.newest))
    return st, [said, Replace(attempt=st.attempt)]


def _rejected(st: TaskState) -> TaskState:
    """The newest draw failed its check: it is never graded unchecked."""
    return replace(st, unchecked={st.now.draws.newest: st.attempt, **st.unchecked})


def draw_fails(st: TaskState, out: Outcome, _: bool) -> Moved:
    """The draw failed its examples; the attempt remembers it when it passes more of them
    than its candidate and every earlier draw."""
    o, now = expect(out, Checked), st.now
    st = _rejected(st)
    d = now.draws
    best = d.best.check if d.best is not None else now.check
    if best is None or o.tests_passed > best.tests_passed:
        better = Best(key=d.newest, check=o, number=len(d.taken), sampling=d.taken[-1])
        draws = msgspec.structs.replace(d, best=better)
        st = replace(st, current=replace_now(st, draws=draws))
    return st, [_verdict(st, Examples(count=Count(o.tests_passed, o.tests_total)))]


# --- Sent back ----------------------------------------------------------------------------


def better_draw(st: TaskState, _: Outcome) -> bool:
    return st.now.draws.best is not None


def take_best_draw(st: TaskState, _: Outcome, __: bool) -> Moved:
    """The draw that passed the most examples takes the candidate's place."""
    now = st.now
    best, own = now.draws.best, now.check
    assert best is not None and own is not None  # a check failed, and a draw beat it
    said = BestDraw(
        attempt=st.attempt, draw=best.number, of=st.rules.draws, sampling=best.sampling,
        count=Count(best.check.tests_passed, best.check.tests_total),
        own=Count(own.tests_passed, own.tests_total),
    )  # fmt: skip
    st = replace(st, candidate=Candidate(key=best.key), current=replace_now(st, check=best.check))
    return st, [Decide(decision=said), Replace(attempt=st.attempt, key=best.key)]


def budget(st: TaskState, _: Outcome) -> bool:
    """The candidate's check used the check budget: it goes back without a grade."""
    return st.now.budget


def send_back(st: TaskState, _: Outcome, __: bool) -> Moved:
    check = st.now.check
    assert check is not None  # a check failed to get here
    back = SendBack(
        attempt=st.attempt, tests_passed=check.tests_passed, tests_total=check.tests_total,
        text=check.text,
    )  # fmt: skip
    return replace(st, checks_left=st.checks_left - 1), [back]


def grade_as_is(st: TaskState, _: Outcome, __: bool) -> Moved:
    said = GradedAsIs(attempt=st.attempt, with_draw=st.now.draws.best is not None)
    return st, [Decide(decision=said)]


GUARDS: Final[Mapping[str, Guard]] = {
    g.__name__: g
    for g in (draws_left, draws_stop, drew_again, drew_unchanged, drew_defect, better_draw, budget)
}
ACTIONS: Final[Mapping[str, Effect]] = {
    a.__name__: a
    for a in (
        draw, stop_draws, draw_again, draw_unchanged, draw_defect, check_draw,
        draw_unchecked_in_place,
        draw_in_place, draw_fails, take_best_draw, send_back, grade_as_is,
    )
}  # fmt: skip
