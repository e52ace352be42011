"""The task machine's guards and actions, by the names its rows give them
(:data:`swapos.policies.retry_tables.TASK`). Pure; the rules are written in
:mod:`swapos.policies.retry`'s docstring."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, TypeVar

import msgspec

from swapos.policies.retry_decisions import (
    Adopted,
    Broke,
    Count,
    LastFailed,
    NoAttemptLeft,
    Passed,
    Routed,
)
from swapos.policies.retry_state import AttemptState, Route, TaskState
from swapos.policies.retry_steps import (
    Action,
    Adopt,
    Decide,
    Failed,
    Finish,
    Generate,
    Graded,
    Outcome,
    Started,
)

Moved = tuple[TaskState, list[Action | Finish]]
"""An action's result: the new state and the steps to hand out, in order."""
Guard = Callable[[TaskState, Outcome], bool]
Effect = Callable[[TaskState, Outcome, bool], Moved]
"""An action: ``(state, outcome, expects_pass) -> (state, steps)``."""

_O = TypeVar("_O", bound=Outcome)


def expect(out: Outcome, kind: type[_O]) -> _O:
    """``out`` as a ``kind`` (the table routed it here by its kind)."""
    assert isinstance(out, kind), f"{type(out).__name__} is not {kind.__name__}"
    return out


def replace(st: TaskState, **changes: object) -> TaskState:
    return msgspec.structs.replace(st, **changes)


def count(grade: Graded) -> Count:
    return Count(grade.tests_passed, grade.tests_total)


# --- Plan -------------------------------------------------------------------------------


def routing_said(st: TaskState, out: Outcome) -> bool:
    """The Router gave reasons for its routing: they are recorded first."""
    return bool(expect(out, Started).why)


def route(st: TaskState, out: Outcome, _: bool) -> Moved:
    o = expect(out, Started)
    route = Route(plans=o.plan_first, models=dict(o.models), examples=o.examples)
    checks = st.rules.selfcheck_retries if st.rules.selfcheck else 0
    said: list[Action | Finish] = [Decide(decision=Routed(text=t)) for t in o.why]
    return replace(st, route=route, checks_left=checks), said


def plans(st: TaskState, _: Outcome) -> bool:
    return st.route.plans


def ask_plan(st: TaskState, _: Outcome, __: bool) -> Moved:
    m = st.route.models
    plan = Generate(model=m["reason"], prompt="plan", attempt=0, upcoming=(m["code"], m["fix"]))
    return st, [plan]


def break_down(st: TaskState, out: Outcome, _: bool) -> Moved:
    """A generation failed: the task ends with its reason."""
    error = expect(out, Failed).error
    return replace(st, error=error, ending=Broke(error=error)), []


# --- Attempts -----------------------------------------------------------------------------


def attempts_left(st: TaskState, _: Outcome) -> bool:
    return st.attempt < st.rules.max_attempts


def begin_attempt(st: TaskState, _: Outcome, expects_pass: bool) -> Moved:
    """The next attempt: its coder (the ``code`` model's first, the fixer's after), the
    model asked instead when a fixer keeps repeating, the Prefetcher's schedule, and the
    attempt its fixer starts from."""
    st = replace(st, attempt=st.attempt + 1)
    m, a = st.route.models, st.attempt
    coder = m["code"] if a == 1 else m["fix"]
    other = m["code"] if a > 1 and not st.fresh and coder != m["code"] else None
    upcoming = () if a == st.rules.max_attempts or expects_pass else (m["fix"],)
    now = AttemptState(coder=coder, other=other, upcoming=upcoming, base=_base(st))
    return replace(st, current=now), []


def _base(st: TaskState) -> int:
    """The attempt a fixer starts from when a newer graded candidate is worse (0: none)."""
    if st.attempt == 1 or st.fresh or not st.scores:
        return 0
    best = st.best_attempt
    return best if best != max(st.scores) else 0


def none_left(st: TaskState, _: Outcome, __: bool) -> Moved:
    return replace(st, ending=NoAttemptLeft(attempt=st.attempt)), []


def pass_task(st: TaskState, _: Outcome, __: bool) -> Moved:
    return replace(st, ending=Passed(attempt=st.attempt)), []


def last_attempt(st: TaskState, _: Outcome) -> bool:
    return st.attempt == st.rules.max_attempts


def last_failed(st: TaskState, _: Outcome, __: bool) -> Moved:
    return replace(st, ending=LastFailed(attempt=st.attempt)), []


# --- Best candidate -----------------------------------------------------------------------


def adopt_best(st: TaskState, _: Outcome) -> bool:
    """Without a pass, the task's best candidate is another than the capsule's newest (nor
    is the newest its repeat)."""
    best = st.best_attempt
    newest = st.kept == best or st.failed.get(st.candidate.key) == best
    return not (st.passed or not best or newest)


def adopt(st: TaskState, _: Outcome, __: bool) -> Moved:
    best = st.best_attempt
    said = Adopted(best=best, grade=count(st.scores[best]), newest=st.kept)
    return st, [Decide(decision=said), Adopt(attempt=best)]


def finish(st: TaskState, _: Outcome, __: bool) -> Moved:
    assert st.ending is not None  # every way to the end says why
    return st, [Finish(ending=st.ending)]


GUARDS: Final[Mapping[str, Guard]] = {
    g.__name__: g for g in (routing_said, plans, attempts_left, last_attempt, adopt_best)
}
ACTIONS: Final[Mapping[str, Effect]] = {
    a.__name__: a
    for a in (
        route, ask_plan, break_down, begin_attempt, none_left, pass_task, last_failed, adopt,
        finish,
    )
}  # fmt: skip
