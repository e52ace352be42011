"""The retry policy: what a task does next, after each thing it did. Pure and synchronous.

This docstring is the one place the pipeline's retry rules are written; the conductor
(:mod:`swapos.pipeline.conductor`) carries out the steps and feeds back what came of them::

    state = TaskState(rules=...)
    state, step = next_step(state, Started(...), expects_pass=...)
    while not isinstance(step, Finish):
        state, step = next_step(state, await carry_out(step), expects_pass=...)

Each :class:`Step` is answered by one :class:`Outcome`: a :class:`Generate` by
:class:`Generated` or :class:`Failed`, a :class:`SelfCheck` by :class:`Checked`, a
:class:`Grade` by :class:`Graded`, every other step (a record) by :class:`Done`. ``expects_pass``
is the Router's estimate, right after the step, of whether a graded candidate passes.
:class:`TaskState` is written by :func:`next_step` alone.

The rules (``PipelineConfig`` fields in ``code``; the models are the profile's roles):

1. **Plan.** The routing decisions are recorded; a task routed to plan first asks the
   ``reason`` model for a plan. Any generation that fails ends the task with its reason.
2. **Attempts.** An *attempt* is one code phase; there are ``max_attempts``. Attempt 1 is the
   ``code`` model's answer to the first prompt (the brief and the plan); every later attempt
   is the ``fix`` model's, reading the test output of the failed grades. While the attempt is
   generated, the Prefetcher is told the fixer comes next, unless it is the last attempt or a
   graded candidate is expected to pass (then the next use is the next task's).
3. **Second opinion** (``second_opinion``, and a ``fix`` model other than the ``code``
   model). When attempt 1 fails (its grade, or its checks with no draw passing), attempt 2 is
   the ``fix`` model's own answer to the *first* prompt, blind to the failed candidate (a
   model shown a failed answer as its own tends to write it again); later attempts are fixed.
4. **Repeats.** A candidate whose code is the same as one whose grade failed (its identity:
   the syntax tree, docstrings and a redefined stub aside) is asked for again, each time with
   a decision saying so: by a chat model first in a *recap* of the failed answers (greedy),
   then ``resamples`` times sampling at ``resample_temperature`` with a recorded seed
   (:func:`resample_seed`; in a recap for a chat model, else from the attempt's own prompt),
   then, for a fixer (not a second opinion) that is not the ``code`` model, once by the
   ``code`` model instead (greedy; in a recap if it chats). A candidate that still repeats
   is recorded as failed ("Identical to attempt N") and never graded again: the task goes on
   with the next attempt. An empty answer is never a repeat.
5. **Pre-grade checks.** Before a grade, a candidate is checked: a repository task's
   candidate equal to its starter fails at once (:data:`UNCHANGED`, recorded as a decision),
   and so does one with a *defect*, what is wrong with it that needs no run to see (it does
   not parse; it does not define a name the brief asks to add: :attr:`Generated.defect`,
   ``precheck_defects``), with the defect as the decision and as its verdict;
   else, when the task has examples (in its docstring or brief) and the profile's
   ``selfcheck`` allows them, they are run (:class:`SelfCheck`). Not checked: the last
   attempt's candidate and an empty one (graded at once), a candidate the checks already sent
   back once (its examples advise, a few are wrong, the tests decide), and any candidate once
   ``selfcheck_retries`` candidates were sent back (none with ``selfcheck`` off), even an
   unchanged one (its grade shows the fixer which tests fail, which "unchanged" alone does
   not); except that a second opinion is checked whatever that budget when the profile draws
   (``draws > 0``) and self-checks. A candidate that passes its check, or has nothing to
   check, is graded.
6. **Draws.** When attempt 1's candidate or a second opinion fails its check and ``draws >
   0``, up to ``draws`` more candidates are drawn from the very prompt it answered, by the
   attempt's coder, sampling at ``resample_temperature`` with recorded seeds. A draw that is
   empty or equal to a rejected candidate is not checked; each other draw is checked like the
   candidate (the starter again or a defect fails, with nothing to run: never graded in
   place), and the first that passes takes the attempt's place and is graded. Each draw's
   verdict is a decision. A draw's step names the draws that may follow it
   (:attr:`Generate.then`), so the runner may decode them side by side
   (:mod:`swapos.policies.draws` says when); they are still taken and checked one by one,
   in turn in order, side by side as they finish (the runner answers a draw's step with
   whichever of its draws finished first, :attr:`Generated.drew`: a short draw is checked
   while the long ones go on), and the rest are dropped once one passes. Draw ``i``'s
   decision names the ``i``-th taken, with its own seed.
7. **Sent back.** When no draw passes (or none is drawn), the attempt keeps whichever of
   its candidate and its checked draws passed the most examples (ties: the candidate, then
   the earlier draw; a draw that passes more takes the candidate's place, with a decision
   saying so). Then a candidate whose check used the budget goes back to the coder: its
   check's failure is its verdict, the budget shrinks by one and the next attempt begins,
   without a grade spent. A second opinion checked beyond the budget is graded as it is
   (with a decision saying so).
8. **Grade.** A graded candidate that passes ends the task. An empty answer is not run: it
   fails with :data:`NO_CODE` (a decision), and is not counted as a grade. A failed grade on
   the last attempt ends the task; else the next attempt begins.
9. **Best candidate.** The task's *best* candidate is its graded candidate (an empty answer
   is not one) with the fewest failing tests, i.e. the most passing (the same tests run on
   every candidate; one that fails to import passes none); ties: the newest. A fixer's
   attempt (not a second opinion) starts from the best candidate when a newer graded one
   passed fewer tests: a decision says so, and its prompt, after the newest outcome, shows
   the best candidate's code as the one to fix (:attr:`Generate.base`). When the task ends
   without a pass, its result is its best candidate's: the tests passed reported are its
   grade's, and when the capsule's newest artifact is another candidate (not its repeat) a
   copy of it is put last (:class:`Adopt`, with a decision): the capsule's final artifact
   is the task's answer.

The tests (``tests/test_retry_policy.py``) mirror these rules row by row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, TypeVar

import msgspec

from swapos.policies.retry_steps import (
    NO_CODE,
    UNCHANGED,
    Action,
    Adopt,
    At,
    Checked,
    Decide,
    Done,
    Failed,
    Finish,
    Generate,
    Generated,
    GeneratePhase,
    Grade,
    Graded,
    Keep,
    Outcome,
    PromptKind,
    Replace,
    Result,
    Rules,
    SelfCheck,
    SendBack,
    Started,
    Step,
    TaskState,
    resample_seed,
)

__all__ = [
    "NO_CODE",
    "RULES",
    "UNCHANGED",
    "Action",
    "Adopt",
    "At",
    "Checked",
    "Decide",
    "Done",
    "Failed",
    "Finish",
    "Generate",
    "GeneratePhase",
    "Generated",
    "Grade",
    "Graded",
    "Keep",
    "Outcome",
    "PromptKind",
    "Replace",
    "Result",
    "Rules",
    "SelfCheck",
    "SendBack",
    "Started",
    "Step",
    "TaskState",
    "next_step",
    "resample_seed",
]


def next_step(
    state: TaskState, outcome: Outcome, *, expects_pass: bool
) -> tuple[TaskState, Action | Finish]:
    """The state after ``outcome`` (what came of the last step, or :class:`Started`) and the
    next step.

    Raises:
        TypeError: ``outcome`` does not answer the last step (a bug in the caller).
    """
    if state.pending:
        _expect(outcome, Done, state)
        return _replace(state, pending=state.pending[1:]), state.pending[0]
    new, steps = RULES[state.at](state, outcome, expects_pass)
    first, *rest = steps
    assert all(not isinstance(s, Finish) for s in rest)  # Finish comes last, alone
    return _replace(new, pending=tuple(s for s in rest if not isinstance(s, Finish))), first


# --- The rules, one function per place the task can be ----------------------------------


def _start(st: TaskState, out: Outcome, expects_pass: bool) -> Result:
    o = _expect(out, Started, st)
    rules = st.rules
    st = _replace(
        st,
        plans=o.plan_first,
        models=dict(o.models),
        examples=o.examples,
        selfchecks=rules.selfcheck_retries if rules.selfcheck else 0,
    )
    if not o.why:
        return _routed(st, Done(), expects_pass)
    return _replace(st, at="routed"), [Decide(phase="route", text=t) for t in o.why]


def _routed(st: TaskState, out: Outcome, expects_pass: bool) -> Result:
    _expect(out, Done, st)
    if st.plans:
        m = st.models
        upcoming = (m["code"], m["fix"])
        plan = Generate(model=m["reason"], prompt="plan", attempt=0, upcoming=upcoming)
        return _replace(st, at="planned"), [plan]
    return _begin(st, 1, expects_pass)


def _planned(st: TaskState, out: Outcome, expects_pass: bool) -> Result:
    if isinstance(out, Failed):
        return _fail(st, out)
    _expect(out, Generated, st)
    return _begin(st, 1, expects_pass)


def _begin(st: TaskState, attempt: int, expects_pass: bool) -> Result:
    """Attempt ``attempt`` begins (rule 2)."""
    if attempt > st.rules.max_attempts:
        return _finish(st, f"attempt {attempt - 1} was the last")
    return _candidate(_replace(st, attempt=attempt), expects_pass)


def _candidate(st: TaskState, expects_pass: bool) -> Result:
    """Ask the attempt's coder for its candidate (rules 2, 3)."""
    m, a = st.models, st.attempt
    upcoming = () if a == st.rules.max_attempts or expects_pass else (m["fix"],)
    coder = m["code"] if a == 1 else m["fix"]
    other = m["code"] if a > 1 and not st.fresh and coder != m["code"] else None
    st = _replace(st, upcoming=upcoming, coder=coder, other=other, tried=0, at="tried")
    st = _replace(st, base=_base(st))
    steps: list[Action | Finish] = []
    if st.fresh:
        text = (
            f"attempt 2 is a second opinion: {coder} answers the first prompt afresh, "
            "without the failed candidate"
        )
        steps.append(Decide(phase="code", text=text))
    if st.base:
        b, n = st.scores[st.base], st.scores[max(st.scores)]
        text = (
            f"attempt {a} starts from attempt {st.base}'s candidate ({_passed(b)}), the best "
            f"graded, not from attempt {max(st.scores)}'s ({_passed(n)})"
        )
        steps.append(Decide(phase="code", text=text))
    return st, [*steps, _tries(st)[0].step(st)]


def _passed(grade: Graded) -> str:
    return f"{grade.tests_passed}/{grade.tests_total} tests passed"


def _base(st: TaskState) -> int:
    """Rule 10: the attempt a fixer starts from when a newer graded candidate is worse."""
    if st.attempt == 1 or st.fresh or not st.scores:
        return 0
    best = st.best_attempt
    return best if best != max(st.scores) else 0


class _Try(msgspec.Struct, frozen=True):
    """One try at an attempt's candidate (rule 5): who answers, from what, sampled how."""

    model: str
    prompt: PromptKind
    sampling: tuple[float, int] | None = None
    instead: bool = False  # the other model, in place of the attempt's coder

    def step(self, st: TaskState) -> Generate:
        return Generate(
            model=self.model, prompt=self.prompt, attempt=st.attempt, upcoming=st.upcoming,
            sampling=self.sampling, base=st.base,
        )  # fmt: skip

    def __str__(self) -> str:
        if self.instead:
            how = f"asking {self.model} instead"
        elif self.sampling is not None:
            how = f"sampling again at temperature {self.sampling[0]:g} with seed {self.sampling[1]}"
        else:
            how = f"asking {self.model} again"
        return how + _IN.get(self.prompt, "")


_IN: Final[Mapping[PromptKind, str]] = {"recap": " in a recap of the failed answers"}


def _tries(st: TaskState) -> list[_Try]:
    """The tries at the attempt's candidate, in order (rule 5); what follows the first
    depends on whether the coder chats, which its first answer tells."""
    r, a = st.rules, st.attempt
    own: PromptKind = "first" if a == 1 else ("opinion" if st.fresh else "fix")
    anew = st.chats.get(st.coder, False)  # a chat model is asked again in a recap
    again: PromptKind = "recap" if anew else own
    tries = [_Try(st.coder, own)]
    tries += [_Try(st.coder, "recap")] if anew else []
    tries += [
        _Try(st.coder, again, (r.resample_temperature, resample_seed(r.task_id, a, i)))
        for i in range(r.resamples)
    ]
    if st.other is not None:
        instead: PromptKind = "recap" if st.chats.get(st.other) else "fix"
        tries.append(_Try(st.other, instead, instead=True))
    return tries


def _tried(st: TaskState, out: Outcome, _: bool) -> Result:
    if isinstance(out, Failed):
        return _fail(st, out)
    o = _expect(out, Generated, st)
    model = _tries(st)[st.tried].model if st.tried else st.coder
    chats = {**st.chats, model: o.chat}
    st = _replace(st, key=o.key, empty=o.empty, defect=o.defect, chats=chats, at="kept")
    repeats = None if o.empty else st.failed.get(o.key)
    if repeats is None:
        return _replace(st, kept=st.attempt), [Keep(attempt=st.attempt)]
    tries, a = _tries(st), st.attempt
    if st.tried + 1 < len(tries):
        nxt = tries[st.tried + 1]
        said = Decide(phase="code", text=f"attempt {a} repeats attempt {repeats}: {nxt}")
        return _replace(st, tried=st.tried + 1, at="tried"), [said, nxt.step(st)]
    asked = [
        *(["a recap"] if st.chats.get(st.coder) else []),
        f"{st.rules.resamples} resamples",
        *([f"{st.other}'s answer"] if st.other is not None else []),
    ]
    text = f"attempt {a} repeats attempt {repeats} after {_listed(asked)}; not graded again"
    rejected = f"Identical to attempt {repeats}, which failed; not graded again."
    st = _replace(st, kept=a)
    return st, [Decide(phase="code", text=text), Keep(attempt=a, rejected=rejected)]


def _kept(st: TaskState, out: Outcome, expects_pass: bool) -> Result:
    """The attempt's candidate is in: not graded again, graded, or checked first (rule 6)."""
    _expect(out, Done, st)
    r, a = st.rules, st.attempt
    if not st.empty and st.key in st.failed:
        return _begin(st, a + 1, expects_pass)
    if a == r.max_attempts or st.empty:
        return _grade(st)
    budget = st.key not in st.unchecked and st.selfchecks > 0
    st = _replace(st, budget=budget)
    if not budget and not (st.fresh and _draws(st) and r.selfcheck):
        return _grade(st)
    if st.key == r.starter:
        return _check_failed(st, _unchanged(), expects_pass)
    if st.defect:
        return _check_failed(st, _defective(st.defect), expects_pass)
    if not st.examples:
        return _grade(st)
    return _replace(st, at="checked"), [SelfCheck(attempt=a)]


def _draws(st: TaskState) -> bool:
    """Whether a failed check of this attempt's candidate draws more (rule 7)."""
    return (st.attempt == 1 or st.fresh) and st.rules.draws > 0


def _unchanged() -> Checked:
    return Checked(passed=False, tests_passed=0, tests_total=1, text=UNCHANGED, precheck=True)


def _defective(defect: str) -> Checked:
    return Checked(passed=False, tests_passed=0, tests_total=1, text=defect, precheck=True)


def _checked(st: TaskState, out: Outcome, expects_pass: bool) -> Result:
    o = _expect(out, Checked, st)
    return _grade(st) if o.passed else _check_failed(st, o, expects_pass)


def _check_failed(st: TaskState, check: Checked, expects_pass: bool) -> Result:
    unchecked = {st.key: st.attempt, **st.unchecked}
    st = _replace(st, check=check, unchecked=unchecked, draw=0, drawn=(), best_draw=None)
    said: list[Action | Finish] = (
        [Decide(phase="selfcheck", text=check.text)] if check.precheck else []
    )
    if _draws(st):
        return _next_draw(st, said)
    if said:
        return _replace(st, at="drawn"), said  # no draw: rule 8 once it is recorded
    return _no_draw_passed(st, expects_pass)


def _draw_sampling(st: TaskState, i: int) -> tuple[float, int]:
    """Draw ``i``'s ``(temperature, seed)`` in this attempt (rule 7)."""
    r = st.rules
    return (r.resample_temperature, resample_seed(f"{r.task_id}:draw", st.attempt, i))


def _untaken(st: TaskState) -> list[tuple[float, int]]:
    """The samplings of the attempt's draws not taken yet, in order (rule 7)."""
    every = (_draw_sampling(st, j) for j in range(1, st.rules.draws + 1))
    return [s for s in every if s not in st.drawn]


def _next_draw(st: TaskState, said: list[Action | Finish]) -> Result:
    first, *rest = _untaken(st)
    draw = Generate(
        model=st.coder, prompt="draw", attempt=st.attempt, upcoming=(st.coder, *st.upcoming),
        sampling=first, then=tuple(rest),
    )  # fmt: skip
    return _replace(st, draw=st.draw + 1, at="drew"), [*said, draw]


def _draw_said(st: TaskState) -> str:
    temperature, seed = st.drawn[-1]
    return f"draw {st.draw} of {st.rules.draws} at temperature {temperature:g} with seed {seed}"


def _drew(st: TaskState, out: Outcome, _: bool) -> Result:
    if isinstance(out, Failed):
        return _fail(st, out)
    o = _expect(out, Generated, st)
    untaken = _untaken(st)
    if o.drew is not None and o.drew not in untaken:
        raise ValueError(f"a draw answered with {o.drew}, not one of the draws left: {untaken}")
    st = _replace(st, drawn=(*st.drawn, o.drew or untaken[0]))
    if o.empty or o.key in st.failed or o.key in st.unchecked:
        text = f"{_draw_said(st)}: empty or a rejected candidate again"
        return _replace(st, at="drawn"), [Decide(phase="code", text=text)]
    st = _replace(st, draw_key=o.key)
    if o.key == st.rules.starter:
        return _draw_verdict(st, _unchanged())
    if o.defect:
        return _draw_verdict(st, _defective(o.defect))
    if not st.examples:
        return _draw_verdict(st, None)
    return _replace(st, at="draw_checked"), [SelfCheck(attempt=st.attempt)]


def _draw_checked(st: TaskState, out: Outcome, _: bool) -> Result:
    return _draw_verdict(st, _expect(out, Checked, st))


def _draw_verdict(st: TaskState, check: Checked | None) -> Result:
    """A draw's check said ``check`` (None: there was nothing to check)."""
    if check is None:
        said = "nothing to check"
    elif check.text == UNCHANGED:
        said = "solution.py unchanged"
    elif check.precheck:
        said = check.text
    else:
        said = f"{check.tests_passed}/{check.tests_total} examples pass"
    a = st.attempt
    if check is None or check.passed:
        text = f"{_draw_said(st)}: {said}; graded in place of attempt {a}'s candidate"
        st = _replace(st, key=st.draw_key, empty=False, defect="", at="grade")
        return st, [Decide(phase="code", text=text), Replace(attempt=a)]
    unchecked = {st.draw_key: a, **st.unchecked}
    best = st.best_draw[1] if st.best_draw is not None else st.check
    if not check.precheck and (best is None or check.tests_passed > best.tests_passed):
        st = _replace(st, best_draw=(st.draw_key, check, _draw_said(st)))
    return _replace(st, unchecked=unchecked, at="drawn"), [
        Decide(phase="code", text=f"{_draw_said(st)}: {said}")
    ]


def _drawn(st: TaskState, out: Outcome, expects_pass: bool) -> Result:
    _expect(out, Done, st)
    if _draws(st) and st.draw < st.rules.draws:
        return _next_draw(st, [])
    return _no_draw_passed(st, expects_pass)


def _no_draw_passed(st: TaskState, expects_pass: bool) -> Result:
    """Rule 8: no draw passed (or none was drawn); the attempt keeps its best checked one."""
    a = st.attempt
    kept: list[Action | Finish] = []
    if st.best_draw is not None:
        key, best, said = st.best_draw
        own = st.check
        assert own is not None  # the candidate's check failed to draw
        text = (
            f"{said} passed {best.tests_passed}/{best.tests_total} examples, more than "
            f"attempt {a}'s candidate ({own.tests_passed}/{own.tests_total}): it takes its place"
        )
        kept = [Decide(phase="code", text=text), Replace(attempt=a, key=key)]
        st = _replace(st, key=key, empty=False, defect="", check=best)
    if not st.budget:
        how = "with that draw" if kept else "as it is"
        text = f"no draw passes the checks: attempt {a} is graded {how}"
        return _replace(st, at="grade"), [*kept, Decide(phase="code", text=text)]
    check = st.check
    assert check is not None  # a check failed to get here
    back = SendBack(
        attempt=a, tests_passed=check.tests_passed, tests_total=check.tests_total, text=check.text
    )
    return _replace(st, selfchecks=st.selfchecks - 1, at="sent_back"), [*kept, back]


def _sent_back(st: TaskState, out: Outcome, expects_pass: bool) -> Result:
    _expect(out, Done, st)
    return _begin(st, st.attempt + 1, expects_pass)


def _to_grade(st: TaskState, out: Outcome, _: bool) -> Result:
    _expect(out, Done, st)
    return _grade(st)


def _grade(st: TaskState) -> Result:
    """Rule 9: grade the attempt's candidate (an empty one without running it)."""
    a = st.attempt
    if st.empty:
        return _replace(st, at="graded"), [
            Decide(phase="grade", text=NO_CODE),
            Grade(attempt=a, run=False),
        ]
    return _replace(st, grades=st.grades + 1, at="graded"), [Grade(attempt=a)]


def _graded(st: TaskState, out: Outcome, expects_pass: bool) -> Result:
    o = _expect(out, Graded, st)
    a = st.attempt
    failed = st.failed if o.passed or st.empty else {st.key: a, **st.failed}
    scores = st.scores if st.empty else {**st.scores, a: o}
    st = _replace(st, last=o, failed=failed, scores=scores)
    if o.passed:
        return _finish(_replace(st, passed_attempt=a), f"attempt {a} passed")
    if a == st.rules.max_attempts:
        return _finish(st, f"attempt {a}, the last, failed")
    return _begin(st, a + 1, expects_pass)


def _fail(st: TaskState, out: Failed) -> Result:
    return _finish(_replace(st, error=out.error), out.error)


def _finish(st: TaskState, reason: str) -> Result:
    """The task ends; without a pass, on its best candidate (rule 10)."""
    best = st.best_attempt
    if st.passed or not best or best == st.kept or st.failed.get(st.key) == best:
        return _replace(st, at="done"), [Finish(reason=reason)]
    text = (
        f"the task's result is attempt {best}'s candidate ({_passed(st.scores[best])}), "
        f"its best graded, not attempt {st.kept}'s"
    )
    return _replace(st, ending=reason, at="adopted"), [
        Decide(phase="grade", text=text),
        Adopt(attempt=best),
    ]


def _adopted(st: TaskState, out: Outcome, _: bool) -> Result:
    _expect(out, Done, st)
    return _replace(st, at="done"), [Finish(reason=st.ending)]


def _done(st: TaskState, out: Outcome, _: bool) -> Result:
    raise TypeError(f"the task has finished; nothing answers {type(out).__name__}")


RULES: Final[Mapping[At, Callable[[TaskState, Outcome, bool], Result]]] = {
    "start": _start,  # Started: record the routing (rule 1)
    "routed": _routed,  # Done: plan, or attempt 1
    "planned": _planned,  # the plan: attempt 1
    "tried": _tried,  # a try at the candidate: another try (rule 5), or keep it
    "kept": _kept,  # Done: the next attempt, a check (rule 6) or the grade
    "checked": _checked,  # the candidate's check: grade, draw (rule 7) or send back (8)
    "drew": _drew,  # a draw: its check, or the next draw
    "draw_checked": _draw_checked,  # a draw's check: graded in place, or the next draw
    "drawn": _drawn,  # Done: the next draw, or rule 8
    "grade": _to_grade,  # Done: the grade
    "graded": _graded,  # the grade: finish, or the next attempt (rule 9)
    "sent_back": _sent_back,  # Done: the next attempt
    "adopted": _adopted,  # Done: the task ends on its best candidate (rule 10)
    "done": _done,
}
"""Where the task is -> the rule that reads the outcome there."""


_O = TypeVar("_O", bound=Outcome)


def _expect(out: Outcome, kind: type[_O], st: TaskState) -> _O:
    if not isinstance(out, kind):
        raise TypeError(f"at {st.at!r} the policy waits for {kind.__name__}, got {out!r}")
    return out


def _replace(st: TaskState, **changes: object) -> TaskState:
    return msgspec.structs.replace(st, **changes)


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
