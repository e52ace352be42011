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
    NoProgress,
    OverSpent,
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
    Generated,
    Graded,
    Outcome,
    Started,
)
from swapos.policies.spending import Spend, affordable, generation_cost, spend_limit

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


# --- Spend ------------------------------------------------------------------------------


def charged(st: TaskState, out: Generated) -> TaskState:
    """The state once the answer ``out`` is paid for: the task's spend, and, for a code
    answer, the attempt's and the code answers' (the first one's cost is the spend limit's
    unit)."""
    cost = generation_cost(st.rules.cost_of(out.model), tokens=out.tokens, prefilled=out.prefilled)
    st = replace(st, spend=st.spend.add(cost, out.tokens, out.prefilled))
    if st.at != "attempting":  # the plan
        return st
    now = st.now
    now = msgspec.structs.replace(now, spend=now.spend.add(cost, out.tokens, out.prefilled))
    if now.at == "drawing":  # a draw: the attempt's draws pay for it
        now = msgspec.structs.replace(
            now, draws=msgspec.structs.replace(now.draws, spent=now.draws.spent + cost)
        )
    code = st.code_spend.add(cost, out.tokens, out.prefilled)
    return replace(st, current=now, code_spend=code, first=st.first or cost)


def affords(st: TaskState, model: str, like: Spend) -> tuple[bool, float]:
    """Whether a next answer of ``model``, like the answers of ``like``, fits the spend
    limit; and what it is expected to cost."""
    expected = like.expected(st.rules.cost_of(model))
    return affordable(spent=st.spent, expected=expected, limit=limit_of(st)), expected


def limit_of(st: TaskState) -> float:
    """The task's spend limit in milliseconds (0: none)."""
    r = st.rules
    return spend_limit(first=st.first, multiple=r.task_budget, seconds=r.task_seconds)


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


def next_coder(st: TaskState) -> str:
    """The model the task's next attempt asks: the ``code`` model's first, the fixer's after."""
    return st.route.models["code"] if st.attempt == 0 else st.route.models["fix"]


def attempts_left(st: TaskState, _: Outcome) -> bool:
    return st.attempt < st.rules.max_attempts and affords(st, next_coder(st), st.code_spend)[0]


def over_spent(st: TaskState, _: Outcome) -> bool:
    """Attempts are left, but the next does not fit the spend limit (*Spend*)."""
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


def stop_spending(st: TaskState, _: Outcome, __: bool) -> Moved:
    expected = affords(st, next_coder(st), st.code_spend)[1]
    ending = OverSpent(
        attempt=st.attempt, spent=st.spent, expected=expected,
        limit=limit_of(st),
    )  # fmt: skip
    return replace(st, ending=ending), []


def stop_priced(st: TaskState, _: Outcome, __: bool) -> Moved:
    """The next attempt's first answer, priced by its prompt, does not fit: the attempt
    before it was the last the task could afford, and the one refused is not counted."""
    ending = OverSpent(
        attempt=st.attempt - 1, spent=st.spent, expected=st.now.priced,
        limit=limit_of(st),
    )  # fmt: skip
    return replace(st, attempt=st.attempt - 1, ending=ending), []


def pass_task(st: TaskState, _: Outcome, __: bool) -> Moved:
    return replace(st, ending=Passed(attempt=st.attempt)), []


def last_attempt(st: TaskState, _: Outcome) -> bool:
    return st.attempt == st.rules.max_attempts


def last_failed(st: TaskState, _: Outcome, __: bool) -> Moved:
    return replace(st, ending=LastFailed(attempt=st.attempt)), []


def _same_failure(st: TaskState) -> int:
    """The graded attempt before this one, when this one's fix failed just as it did (0:
    none, or the rule is off, or this attempt is not a fix)."""
    if not st.rules.stop_same_failure or st.attempt == 1 or st.fresh or st.last is None:
        return 0
    before = [a for a in st.scores if a < st.attempt]
    if not before or not st.last.failure:
        return 0
    prev = max(before)
    return prev if st.scores[prev].failure == st.last.failure else 0


def no_progress(st: TaskState, _: Outcome) -> bool:
    """This fix failed the very tests the grade before it did, with the same output."""
    return bool(_same_failure(st))


def stop_no_progress(st: TaskState, _: Outcome, __: bool) -> Moved:
    return replace(st, ending=NoProgress(attempt=st.attempt, same_as=_same_failure(st))), []


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
    g.__name__: g
    for g in (
        routing_said, plans, attempts_left, over_spent, last_attempt, no_progress, adopt_best,
    )
}  # fmt: skip
ACTIONS: Final[Mapping[str, Effect]] = {
    a.__name__: a
    for a in (
        route, ask_plan, break_down, begin_attempt, none_left, stop_spending, stop_priced,
        pass_task,
        last_failed, stop_no_progress, adopt, finish,
    )
}  # fmt: skip
