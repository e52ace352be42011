"""The retry policy's two machines as data: every transition of the task machine and of the
attempt machine, one row each. Everything that moves a task lives in these rows; the rules
they carry out are written in :mod:`swapos.policies.retry`'s docstring, the guards and
actions they name are the functions of :mod:`~swapos.policies.retry_task` and
:mod:`~swapos.policies.retry_attempt` of that name. ``python -m
swapos.policies.draw_tables`` draws them into docs/architecture.md.

A row reads: in state ``source``, on ``event``, when ``guard`` holds ("": always), do
``action`` ("": nothing) and go to ``target``. The rows of one state and event are tried in
order; the last has no guard. An event is the outcome that answers a step (its class name:
``Generated``, ``Done``...), :data:`ENTER` in a *choice* state (one that decides at once,
without waiting for an outcome), or, in the task machine's ``attempting`` state, the end
the attempt came to (one of :data:`ATTEMPT_ENDS`). A state whose rows wait for ``Done``
waits for the record steps its arrival handed out.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Transition(NamedTuple):
    """One row: ``source --event [guard] / action--> target``."""

    source: str
    event: str
    target: str
    guard: str = ""
    action: str = ""


ENTER: Final = "enter"
"""The event of a choice state: it is decided on arrival."""

T = Transition
TASK: Final[tuple[Transition, ...]] = (
    # Plan: the routing is recorded, then the plan when the task plans first.
    T("start", "Started", "routed", "routing_said", "route"),
    T("start", "Started", "plan_first", "", "route"),
    T("routed", "Done", "plan_first"),
    T("plan_first", ENTER, "planning", "plans", "ask_plan"),
    T("plan_first", ENTER, "next_attempt"),
    T("planning", "Generated", "next_attempt"),
    T("planning", "Failed", "ending", "", "break_down"),
    # Attempts: each runs the attempt machine to one of its ends.
    T("next_attempt", ENTER, "attempting", "attempts_left", "begin_attempt"),
    T("next_attempt", ENTER, "ending", "over_spent", "stop_spending"),
    T("next_attempt", ENTER, "ending", "", "none_left"),
    T("attempting", "passed", "ending", "", "pass_task"),
    T("attempting", "failed", "ending", "last_attempt", "last_failed"),
    T("attempting", "failed", "ending", "no_progress", "stop_no_progress"),
    T("attempting", "failed", "next_attempt"),
    T("attempting", "repeated", "next_attempt"),
    T("attempting", "returned", "next_attempt"),
    T("attempting", "broken", "ending"),
    T("attempting", "unaffordable", "ending", "", "stop_priced"),
    # Best candidate: the task ends on it.
    T("ending", ENTER, "adopting", "adopt_best", "adopt"),
    T("ending", ENTER, "done", "", "finish"),
    T("adopting", "Done", "done", "", "finish"),
)
"""The task machine: plan -> attempts -> adopt the best candidate -> finish."""

ATTEMPT: Final[tuple[Transition, ...]] = (
    # Attempts, Second opinion, Best candidate: who answers, and from what; with a spend
    # limit, a next attempt's first answer is priced by its prompt before it is asked (Spend).
    T("begin", ENTER, "pricing", "priced_first", "price"),
    T("begin", ENTER, "asking", "", "ask"),
    T("pricing", "Priced", "asking", "price_fits", "ask"),
    T("pricing", "Priced", "unaffordable", "", "refuse_price"),
    T("pricing", "Failed", "broken", "", "break_down"),
    # Repeats: a failed candidate again is asked for again, then not graded.
    T("asking", "Generated", "asking", "repeat_with_tries_left", "ask_again"),
    T("asking", "Generated", "repeating", "repeat", "reject_repeat"),
    T("asking", "Generated", "kept", "", "keep"),
    T("asking", "Failed", "broken", "", "break_down"),
    T("repeating", "Done", "repeated"),
    # Pre-grade checks.
    T("kept", "Done", "grading", "last_or_empty", "grade"),
    T("kept", "Done", "grading", "unchecked", "grade"),
    T("kept", "Done", "check_failed", "unchanged", "hold_unchanged"),
    T("kept", "Done", "check_failed", "defective", "hold_defect"),
    T("kept", "Done", "grading", "no_examples", "grade"),
    T("kept", "Done", "checking", "", "self_check"),
    T("checking", "Checked", "grading", "check_passed", "grade"),
    T("checking", "Checked", "check_failed", "", "fail_check"),
    # Draws.
    T("check_failed", ENTER, "settle", "draws_stop", "stop_draws"),
    T("check_failed", ENTER, "drawing", "draws_left", "draw"),
    T("check_failed", ENTER, "drawn", "held"),
    T("check_failed", ENTER, "settle"),
    T("drawing", "Generated", "drawn", "drew_again", "draw_again"),
    T("drawing", "Generated", "drawn", "drew_unchanged", "draw_unchanged"),
    T("drawing", "Generated", "drawn", "drew_defect", "draw_defect"),
    T("drawing", "Generated", "replacing", "no_examples", "draw_unchecked_in_place"),
    T("drawing", "Generated", "draw_checking", "", "check_draw"),
    T("drawing", "Failed", "broken", "", "break_down"),
    T("draw_checking", "Checked", "replacing", "check_passed", "draw_in_place"),
    T("draw_checking", "Checked", "drawn", "", "draw_fails"),
    T("drawn", "Done", "settle", "draws_stop", "stop_draws"),
    T("drawn", "Done", "drawing", "draws_left", "draw"),
    T("drawn", "Done", "settle"),
    # Sent back: the best draw takes the candidate's place; then back to the coder.
    T("settle", ENTER, "settled", "better_draw", "take_best_draw"),
    T("settle", ENTER, "settled"),
    T("settled", ENTER, "sending_back", "budget", "send_back"),
    T("settled", ENTER, "replacing", "", "grade_as_is"),
    T("sending_back", "Done", "returned"),
    # Grade.
    T("replacing", "Done", "grading", "", "grade"),
    T("grading", "Graded", "passed", "grade_passed", "score"),
    T("grading", "Graded", "failed", "", "score"),
)
"""The attempt machine: ask -> check -> draws -> grade."""

ATTEMPT_ENDS: Final = ("passed", "failed", "repeated", "returned", "broken", "unaffordable")
"""Where an attempt ends: the task machine's ``attempting`` state moves on each of them
(graded and passed or failed; not graded: a repeat, or sent back by its check; a
generation failed; not asked: its first answer, priced by its prompt, does not fit the
spend limit)."""
TASK_START: Final = "start"
ATTEMPT_START: Final = "begin"
DONE: Final = "done"
