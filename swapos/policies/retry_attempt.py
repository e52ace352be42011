"""The attempt machine's guards and actions up to its draws, by the names its rows give
them (:data:`swapos.policies.retry_tables.ATTEMPT`): asking for the candidate, its repeats,
its pre-grade checks and its grade. The draws' are :mod:`~swapos.policies.retry_draws`'s.
Pure; the rules are written in :mod:`swapos.policies.retry`'s docstring."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from swapos.policies.retry_decisions import (
    Ask,
    Defect,
    Held,
    HeldBack,
    NoCode,
    Repeats,
    SecondOpinion,
    StartsFromBest,
    StillRepeats,
    Unchanged,
)
from swapos.policies.retry_state import AttemptState, Candidate, Draws, TaskState
from swapos.policies.retry_steps import (
    Action,
    Checked,
    Decide,
    Finish,
    Generate,
    Generated,
    Grade,
    Graded,
    Keep,
    Outcome,
    Price,
    Priced,
    PromptKind,
    SelfCheck,
    resample_seed,
)
from swapos.policies.retry_task import (
    Effect,
    Guard,
    Moved,
    affords,
    count,
    expect,
    limit_of,
    replace,
)
from swapos.policies.retry_text import UNCHANGED
from swapos.policies.spending import affordable, generation_cost

# --- Attempts, Second opinion, Best candidate: the first try -------------------------------


def ask(st: TaskState, _: Outcome, __: bool) -> Moved:
    """Ask the attempt's coder for its candidate, saying first when it is a second opinion
    and when its fixer starts from the best candidate."""
    now, steps = st.now, list[Action | Finish]()
    if st.fresh:
        steps.append(Decide(decision=SecondOpinion(model=now.coder)))
    if now.base:
        newest = max(st.scores)
        said = StartsFromBest(
            attempt=st.attempt, best=now.base, best_grade=count(st.scores[now.base]),
            newest=newest, newest_grade=count(st.scores[newest]),
        )  # fmt: skip
        steps.append(Decide(decision=said))
    return st, [*steps, _generate(st, tries(st)[0])]


def tries(st: TaskState, chats: Mapping[str, bool] | None = None) -> list[Ask]:
    """The tries at the attempt's candidate, in order (the *Repeats* rule); what follows the
    first depends on whether the coder chats, which its first answer tells (``chats``:
    what is known of that, default the state's)."""
    r, a, now = st.rules, st.attempt, st.now
    chats = st.chats if chats is None else chats
    own: PromptKind = "first" if a == 1 else ("opinion" if st.fresh else "fix")
    anew = chats.get(now.coder, False)  # a chat model is asked again in a recap
    again: PromptKind = "recap" if anew else own
    asks = [Ask(model=now.coder, prompt=own)]
    asks += [Ask(model=now.coder, prompt="recap")] if anew else []
    samplings = [
        (r.resample_temperature, resample_seed(r.task_id, a, i)) for i in range(r.resamples)
    ]
    asks += [Ask(model=now.coder, prompt=again, sampling=s) for s in samplings]
    if now.other is not None:
        instead: PromptKind = "recap" if chats.get(now.other) else "fix"
        asks.append(Ask(model=now.other, prompt=instead, instead=True))
    return asks


def _generate(st: TaskState, ask: Ask) -> Generate:
    now = st.now
    prompt: PromptKind = ask.prompt  # type: ignore[assignment]  # an Ask's prompt is a kind
    return Generate(
        model=ask.model, prompt=prompt, attempt=st.attempt, upcoming=now.upcoming,
        sampling=ask.sampling, base=now.base,
    )  # fmt: skip


# --- Spend: a next attempt priced by the prompt it sends ----------------------------------


def priced_first(st: TaskState, _: Outcome) -> bool:
    """The task has a spend limit and this is a next attempt: its first answer is priced by
    its prompt before it is asked (a fix's prompt carries every earlier attempt)."""
    return st.rules.price_attempts and st.attempt > 1 and limit_of(st) > 0


def price(st: TaskState, _: Outcome, __: bool) -> Moved:
    return st, [Price(step=_generate(st, tries(st)[0]))]


def _priced(st: TaskState, out: Outcome) -> float:
    """The attempt's first answer at its coder's costs: the tokens the task's code answers
    generated on average, and the tokens its prompt would prefill."""
    like, prefill = st.code_spend, expect(out, Priced).prefill
    tokens = like.tokens / like.answers if like.answers else 0.0
    return generation_cost(st.rules.cost_of(st.now.coder), tokens=tokens, prefilled=prefill)


def price_fits(st: TaskState, out: Outcome) -> bool:
    return affordable(spent=st.spent, expected=_priced(st, out), limit=limit_of(st))


def refuse_price(st: TaskState, out: Outcome, _: bool) -> Moved:
    return replace(st, current=replace_now(st, priced=_priced(st, out))), []


# --- Repeats ----------------------------------------------------------------------------


def _answered(st: TaskState, out: Outcome) -> TaskState:
    """The state once ``out``, the answer to the try out, is the attempt's candidate."""
    o = expect(out, Generated)
    now = st.now
    model = tries(st)[now.tried].model if now.tried else now.coder
    candidate = Candidate(key=o.key, empty=o.empty, defect=o.defect)
    return replace(st, chats={**st.chats, model: o.chat}, candidate=candidate)


def _repeats(st: TaskState) -> int:
    """The attempt whose failed candidate the current one repeats (0: none)."""
    return 0 if st.candidate.empty else st.failed.get(st.candidate.key, 0)


def repeat_with_tries_left(st: TaskState, out: Outcome) -> bool:
    """The candidate repeats a failed one, and a next try is left that fits the spend
    limit (a try is expected to cost what the task's code answers cost)."""
    after = _answered(st, out)
    left = _tries_left(after)
    return (
        bool(_repeats(after)) and bool(left) and affords(after, left[0].model, after.code_spend)[0]
    )


def _tries_left(st: TaskState) -> list[Ask]:
    """The tries at the attempt's candidate not yet given."""
    return tries(st)[st.now.tried + 1 :]


def repeat(st: TaskState, out: Outcome) -> bool:
    return bool(_repeats(_answered(st, out)))


def ask_again(st: TaskState, out: Outcome, _: bool) -> Moved:
    st = _answered(st, out)
    tried = st.now.tried + 1
    st = replace(st, current=replace_now(st, tried=tried))
    then = tries(st)[tried]
    said = Repeats(attempt=st.attempt, repeats=_repeats(st), then=then)
    return st, [Decide(decision=said), _generate(st, then)]


def reject_repeat(st: TaskState, out: Outcome, _: bool) -> Moved:
    """The candidate still repeats: the decision lists the tries it was given (those the
    spend limit refused are not among them)."""
    st = _answered(st, out)
    now, a, repeats = st.now, st.attempt, _repeats(st)
    taken = tries(st)[1 : now.tried + 1]
    said = StillRepeats(
        attempt=a, repeats=repeats,
        recap=any(t.prompt == "recap" and t.sampling is None and not t.instead for t in taken),
        resamples=sum(t.sampling is not None for t in taken),
        other=now.other if any(t.instead for t in taken) else None,
        unaffordable=bool(_tries_left(st)),
    )  # fmt: skip
    return replace(st, kept=a), [Decide(decision=said), Keep(attempt=a, repeats=repeats)]


def keep(st: TaskState, out: Outcome, _: bool) -> Moved:
    st = _answered(st, out)
    return replace(st, kept=st.attempt), [Keep(attempt=st.attempt)]


def replace_now(st: TaskState, **changes: object) -> AttemptState:
    """The current attempt's state with ``changes``."""
    return msgspec.structs.replace(st.now, **changes)


# --- Pre-grade checks ---------------------------------------------------------------------


def last_or_empty(st: TaskState, _: Outcome) -> bool:
    return st.attempt == st.rules.max_attempts or st.candidate.empty


def _budget(st: TaskState) -> bool:
    """Whether a check of the candidate uses the check budget."""
    return st.candidate.key not in st.unchecked and st.checks_left > 0


def draws_on(st: TaskState) -> bool:
    """Whether a failed check of this attempt's candidate draws more (the *Draws* rule)."""
    return (st.attempt == 1 or st.fresh) and st.rules.draws > 0


def unchecked(st: TaskState, _: Outcome) -> bool:
    """No check: the budget is spent (or never was) and it is no second opinion that is
    checked and drawn for whatever the budget."""
    return not _budget(st) and not (st.fresh and draws_on(st) and st.rules.selfcheck)


def unchanged(st: TaskState, _: Outcome) -> bool:
    return st.candidate.key == st.rules.starter


def defective(st: TaskState, _: Outcome) -> bool:
    return bool(st.candidate.defect)


def no_examples(st: TaskState, _: Outcome) -> bool:
    return not st.route.examples


def self_check(st: TaskState, _: Outcome, __: bool) -> Moved:
    st = replace(st, current=replace_now(st, budget=_budget(st)))
    return st, [SelfCheck(attempt=st.attempt)]


def hold_unchanged(st: TaskState, _: Outcome, __: bool) -> Moved:
    return _held(st, Unchanged())


def hold_defect(st: TaskState, _: Outcome, __: bool) -> Moved:
    return _held(st, Defect(text=st.candidate.defect))


def _held(st: TaskState, seen: Held) -> Moved:
    """The candidate fails its check with nothing run (the starter again, or a defect)."""
    text = seen.text if isinstance(seen, Defect) else UNCHANGED
    check = Checked(passed=False, tests_passed=0, tests_total=1, text=text, precheck=True)
    st = replace(st, current=replace_now(st, budget=_budget(st)))
    return _failed(st, check), [Decide(decision=HeldBack(seen=seen))]


def check_passed(st: TaskState, out: Outcome) -> bool:
    return expect(out, Checked).passed


def fail_check(st: TaskState, out: Outcome, _: bool) -> Moved:
    return _failed(st, expect(out, Checked)), []


def _failed(st: TaskState, check: Checked) -> TaskState:
    """The candidate's check failed: it is never graded unchecked again; its draws begin."""
    rejected = {st.candidate.key: st.attempt, **st.unchecked}
    now = replace_now(st, check=check, draws=Draws())
    return replace(st, unchecked=rejected, current=now)


def held(st: TaskState, _: Outcome) -> bool:
    """The failed check was a pre-grade one (a decision says so, and is recorded first)."""
    return st.now.check is not None and st.now.check.precheck


# --- Grade ------------------------------------------------------------------------------


def grade(st: TaskState, _: Outcome, __: bool) -> Moved:
    """Grade the attempt's candidate (an empty one without running it)."""
    a = st.attempt
    if st.candidate.empty:
        return st, [Decide(decision=NoCode()), Grade(attempt=a, run=False)]
    return replace(st, grades=st.grades + 1), [Grade(attempt=a)]


def grade_passed(st: TaskState, out: Outcome) -> bool:
    return expect(out, Graded).passed


def score(st: TaskState, out: Outcome, _: bool) -> Moved:
    """The grade is the task's newest; a failed one's candidate is never graded again."""
    o, a, c = expect(out, Graded), st.attempt, st.candidate
    failed = st.failed if o.passed or c.empty else {c.key: a, **st.failed}
    scores = st.scores if c.empty else {**st.scores, a: o}
    return replace(st, last=o, failed=failed, scores=scores), []


GUARDS: Final[Mapping[str, Guard]] = {
    g.__name__: g
    for g in (
        priced_first, price_fits, repeat_with_tries_left, repeat, last_or_empty, unchecked,
        unchanged, defective, no_examples, check_passed, held, grade_passed,
    )
}  # fmt: skip
ACTIONS: Final[Mapping[str, Effect]] = {
    a.__name__: a
    for a in (
        price, refuse_price, ask, ask_again, reject_repeat, keep, self_check, hold_unchanged,
        hold_defect, fail_check, grade, score,
    )
}  # fmt: skip
