"""The retry policy: what a task does next, after each thing it did. Pure and synchronous.

This docstring is the one place the pipeline's retry rules are written. They run as two
machines whose transitions are declared as data in :mod:`swapos.policies.retry_tables`
(drawn in docs/architecture.md): the *task machine* (plan -> attempts -> adopt the best
candidate -> finish) and the *attempt machine* (ask -> check -> draws -> grade); each row
names the guard that selects it and the action that carries it out
(:mod:`~swapos.policies.retry_task`, :mod:`~swapos.policies.retry_attempt`,
:mod:`~swapos.policies.retry_draws`). The conductor (:mod:`swapos.pipeline.conductor`)
carries out the steps and feeds back what came of them::

    state = TaskState(rules=...)
    state, step = next_step(state, Started(...), expects_pass=..., wall_s=...)
    while not isinstance(step, Finish):
        state, step = next_step(state, await carry_out(step), expects_pass=..., wall_s=...)

Each step is answered by one outcome: a :class:`Generate` by :class:`Generated` or
:class:`Failed`, a :class:`SelfCheck` by :class:`Checked`, a :class:`Grade` by
:class:`Graded`, every other step (a record: a decision, a kept candidate...) by
:class:`Done`. ``expects_pass`` is the Router's estimate, right after the step, of whether a
graded candidate passes; ``wall_s`` the task's wall-clock so far (what the *Spend* rule
counts with ``count_wall``). Decisions are values (:mod:`~swapos.policies.retry_decisions`);
their words are :mod:`~swapos.policies.retry_text`'s. The settings are ``PipelineConfig``'s
(:class:`Rules`); the models are the profile's roles.

The rules, by name (the tables' comments name them too):

- **Plan.** The routing decisions are recorded; a task routed to plan first asks the
  ``reason`` model for a plan. Any generation that fails ends the task with its reason.
- **Attempts.** An *attempt* is one code phase; there are ``max_attempts``. Attempt 1 is the
  ``code`` model's answer to the first prompt (the brief and the plan); every later attempt
  is the ``fix`` model's, reading the test output of the failed grades. While an attempt is
  generated the Prefetcher is told the fixer comes next, unless it is the last attempt or a
  graded candidate is expected to pass (then the next use is the next task's).
- **Second opinion** (``second_opinion``, and a ``fix`` model other than the ``code``
  model). When attempt 1 fails (its grade, or its checks with no draw passing), attempt 2 is
  the ``fix`` model's own answer to the *first* prompt, blind to the failed candidate (a
  model shown a failed answer as its own tends to write it again).
- **Repeats.** A candidate whose code is the same as one whose grade failed (its identity:
  the syntax tree, docstrings and a redefined stub aside) is asked for again, each time with
  a decision saying so: by a chat model first in a *recap* of the failed answers (greedy),
  then ``resamples`` times sampling at ``resample_temperature`` with a recorded seed
  (:func:`resample_seed`; in a recap for a chat model, else from the attempt's own prompt),
  then, for a fixer (not a second opinion) that is not the ``code`` model, once by the
  ``code`` model instead (greedy; in a recap if it chats). A candidate that still repeats is
  recorded as failed and never graded again: the next attempt begins. An empty answer is
  never a repeat.
- **Pre-grade checks.** Before a grade a candidate is checked: a repository task's candidate
  equal to its starter fails at once (:data:`UNCHANGED`), and so does one with a *defect*
  seen without a run (:attr:`Generated.defect`, from the profile's pre-grade passes), a
  decision saying which; else, when the task has examples and ``selfcheck`` is on, they are
  run (:class:`SelfCheck`). Not checked: the last attempt's candidate and an empty one
  (graded at once), a candidate the checks already sent back once (its examples advise, the
  tests decide), and any candidate once ``selfcheck_retries`` candidates were sent back
  (none with ``selfcheck`` off), even an unchanged one (its grade shows the fixer which tests
  fail); except that a second opinion is checked whatever that budget when the profile
  draws (``draws > 0``) and self-checks. A candidate that passes its check, or has nothing
  to check, is graded.
- **Draws.** When attempt 1's candidate or a second opinion fails its check and ``draws >
  0``, up to ``draws`` more candidates are drawn from the very prompt it answered, by the
  attempt's coder, at ``resample_temperature`` with recorded seeds. A draw that is empty or
  a rejected candidate again is not checked; each other draw is checked like the candidate
  (the starter again or a defect fails with nothing run: never graded in place), and the
  first that passes takes the attempt's place and is graded. Each draw's verdict is a
  decision naming the draw taken and its seed. With ``side_by_side``, a draw's step names
  the draws that may follow it (:attr:`Generate.then`) so the runner may decode them side
  by side (:mod:`swapos.policies.draws` says when) and answer with whichever finished
  first (:attr:`Generated.drew`); they are still taken and checked one by one, and the rest
  are dropped once one passes.
- **Sent back.** When no draw passes (or none is drawn), the attempt keeps whichever of its
  candidate and its checked draws passed the most examples (ties: the candidate, then the
  earlier draw; a draw that passes more takes the candidate's place, with a decision). Then
  a candidate whose check used the budget goes back to the coder: its check's failure is its
  verdict, the budget shrinks by one and the next attempt begins, without a grade spent. A
  second opinion checked beyond the budget is graded as it is (a decision says so).
- **Grade.** A graded candidate that passes ends the task. An empty answer is not run: it
  fails with :data:`NO_CODE` and is not counted as a grade. A failed grade on the last
  attempt ends the task; so does, with ``stop_same_failure``, a fix (not a second opinion)
  whose grade fails with the very test output of the grade before it (:class:`NoProgress`:
  the fixes find nothing new); else the next attempt begins.
- **Spend.** Every answer is paid for: its tokens and its prefilled prompt tokens at its
  model's measured costs (:mod:`swapos.policies.spending`). With ``task_seconds`` > 0 the
  task may spend that many seconds, with ``task_budget`` > 0 that many times its first code
  answer's cost (the smaller where both are set). With ``count_wall`` the task's spend is
  its answers' cost or its wall-clock so far, whichever is more (grades, checks, loads and
  the estimates' error are spent too). A draw, a try at a repeated candidate or a next
  attempt is asked only while the task's spend plus what it is expected to cost (the mean of
  the answers it would repeat: the attempt's for a draw, the task's code answers' otherwise)
  fits. With ``price_attempts``, a next attempt is also priced by the prompt it sends before
  it is asked (:class:`Price`): a fix's prompt carries every earlier attempt and its test
  output, often thousands of tokens where the first prompt had hundreds, so its first answer
  is expected to cost the task's mean code answer at the coder's costs plus the tokens that
  prompt would prefill (:class:`Priced`: less the prefix it shares with a prompt the task
  sent that model before). A draw that does not fit stops the draws (a decision says so:
  :class:`~swapos.policies.retry_decisions.DrawsStopped`); an attempt that does not fit, by
  either price, is not asked and the task ends after the one before it
  (:class:`~swapos.policies.retry_decisions.OverSpent`). An attempt's draws may also cost at
  most ``draw_seconds`` in all (long answers get fewer draws). With ``stale_draws`` > 0 an
  attempt's draws also stop once that many in a row brought nothing new (empty, a rejected
  candidate again, the starter unchanged). With ``reserve_next``, a draw must also leave
  room in the task's limit for the next attempt's first answer (the task's code answers'
  mean at the ``fix`` model's costs; none on the last attempt), so a weak model's draws
  never spend what the stronger fixer needs (``why`` ``"reserved"``).
- **Best candidate.** The task's *best* candidate is its graded candidate (not an empty
  answer) with the most passing tests; ties: the newest. A fixer's attempt (not a second
  opinion) starts from the best candidate when a newer graded one passed fewer tests (a
  decision; its prompt shows the best candidate's code to fix: :attr:`Generate.base`). A
  task that ends without a pass ends on its best candidate: the tests passed reported are
  its grade's, and when the capsule's newest artifact is another candidate (not its repeat)
  a copy of it is put last (:class:`Adopt`, with a decision).

How the machines run: a step's outcome is the *event* of the current state's rows (the
attempt machine's while the task is ``attempting``); the first row whose guard holds fires
its action, which may hand out steps, and moves to its target. A *choice* state decides at
once (:data:`~swapos.policies.retry_tables.ENTER`); an attempt that reaches one of its ends
is the task machine's event; so one outcome may fire several rows, their steps handed out in
order, every one but the last a record answered by :class:`Done`. A new rule is a row: a
guard before the rows it pre-empts (a stop when draws can no longer win, before
``drawn --Done--> drawing``), and an :class:`~swapos.policies.retry_decisions.Ending` or a
decision that says why. The tests (``tests/test_retry_policy.py``) play the rules row by
row, and check that they fire every transition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

import msgspec

from swapos.policies import retry_attempt, retry_draws, retry_task
from swapos.policies.retry_decisions import (
    Broke,
    LastFailed,
    NoAttemptLeft,
    Passed,
)
from swapos.policies.retry_state import TaskState
from swapos.policies.retry_steps import (
    RECORDS,
    Action,
    Adopt,
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
    Price,
    Priced,
    PromptKind,
    Replace,
    Rules,
    SelfCheck,
    SendBack,
    Started,
    Step,
    resample_seed,
)
from swapos.policies.retry_tables import (
    ATTEMPT,
    ATTEMPT_ENDS,
    DONE,
    ENTER,
    TASK,
    Transition,
)
from swapos.policies.retry_task import Effect, Guard
from swapos.policies.retry_text import NO_CODE, UNCHANGED

__all__ = [
    "NO_CODE",
    "UNCHANGED",
    "Action",
    "Adopt",
    "Advanced",
    "Broke",
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
    "LastFailed",
    "NoAttemptLeft",
    "Outcome",
    "Passed",
    "Price",
    "Priced",
    "PromptKind",
    "Replace",
    "Rules",
    "SelfCheck",
    "SendBack",
    "Started",
    "Step",
    "TaskState",
    "advance",
    "next_step",
    "resample_seed",
]

GUARDS: Final[Mapping[str, Guard]] = {
    **retry_task.GUARDS,
    **retry_attempt.GUARDS,
    **retry_draws.GUARDS,
}
"""Every guard a row may name, by its name."""
ACTIONS: Final[Mapping[str, Effect]] = {
    **retry_task.ACTIONS,
    **retry_attempt.ACTIONS,
    **retry_draws.ACTIONS,
}
"""Every action a row may name, by its name."""


class Advanced(NamedTuple):
    """What :func:`advance` did: the new state, the next step, and the rows it fired."""

    state: TaskState
    step: Action | Finish
    fired: tuple[Transition, ...]


def next_step(
    state: TaskState, outcome: Outcome, *, expects_pass: bool, wall_s: float = 0.0
) -> tuple[TaskState, Action | Finish]:
    """The state after ``outcome`` (what came of the last step, or :class:`Started`) and the
    next step; ``wall_s`` is the task's wall-clock so far, in seconds (0: not measured).

    Raises:
        TypeError: ``outcome`` does not answer the last step (a bug in the caller).
    """
    advanced = advance(state, outcome, expects_pass=expects_pass, wall_s=wall_s)
    return advanced.state, advanced.step


def advance(
    state: TaskState, outcome: Outcome, *, expects_pass: bool, wall_s: float = 0.0
) -> Advanced:
    """:func:`next_step`, with the rows it fired (none while record steps are handed out).

    Raises:
        TypeError: ``outcome`` does not answer the last step (a bug in the caller).
    """
    if wall_s * 1000 > state.wall:
        state = _replace(state, wall=wall_s * 1000)
    if state.pending:
        if not isinstance(outcome, Done):
            raise TypeError(f"the policy waits for Done (a record step), got {outcome!r}")
        return Advanced(_replace(state, pending=state.pending[1:]), state.pending[0], ())
    if state.at == DONE:
        raise TypeError(f"the task has finished; nothing answers {type(outcome).__name__}")
    if isinstance(outcome, Generated):  # every answer is paid for before the rows read it
        state = retry_task.charged(state, outcome)
    steps: list[Action | Finish] = []
    fired: list[Transition] = []
    event = type(outcome).__name__
    while True:
        attempting = state.at == "attempting" and state.now.at not in ATTEMPT_ENDS
        table, at = (ATTEMPT, state.now.at) if attempting else (TASK, state.at)
        row = _row(table, at, event, state, outcome)
        if row.action:
            state, more = ACTIONS[row.action](state, outcome, expects_pass)
            steps += more
        fired.append(row)
        state = _moved(state, row.target, attempt=attempting)
        if state.at == "attempting" and state.now.at in ATTEMPT_ENDS:
            event = state.now.at
        elif _is_choice(state):
            event = ENTER
        else:
            break
    first, *rest = steps
    assert all(isinstance(s, RECORDS) for s in rest[:-1]), steps
    assert not any(isinstance(s, Finish) for s in rest), steps  # Finish comes alone
    return Advanced(_replace(state, pending=tuple(rest)), first, tuple(fired))


def _row(
    table: tuple[Transition, ...], at: str, event: str, state: TaskState, outcome: Outcome
) -> Transition:
    rows = [t for t in table if t.source == at and t.event == event]
    if not rows:
        waits = dict.fromkeys(t.event for t in table if t.source == at and t.event != ENTER)
        raise TypeError(f"at {at!r} the policy waits for {' or '.join(waits)}, got {outcome!r}")
    return next(t for t in rows if not t.guard or GUARDS[t.guard](state, outcome))


def _moved(state: TaskState, target: str, *, attempt: bool) -> TaskState:
    if attempt:
        return _replace(state, current=msgspec.structs.replace(state.now, at=target))
    return _replace(state, at=target)


TASK_CHOICES: Final = frozenset(t.source for t in TASK if t.event == ENTER)
ATTEMPT_CHOICES: Final = frozenset(t.source for t in ATTEMPT if t.event == ENTER)
"""The states of each machine that decide on arrival."""


def _is_choice(state: TaskState) -> bool:
    if state.at == "attempting":
        return state.now.at in ATTEMPT_CHOICES
    return state.at in TASK_CHOICES


def _replace(st: TaskState, **changes: object) -> TaskState:
    return msgspec.structs.replace(st, **changes)
