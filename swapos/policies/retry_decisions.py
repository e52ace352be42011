"""What the retry policy decides, as values: each :class:`Decision` a :class:`Decide` step
records, and each :class:`Ending` a task ends with. Tests compare these; their words are
:mod:`swapos.policies.retry_text`'s (the event log and the capsule keep the words)."""

from __future__ import annotations

from typing import ClassVar, Final, Literal

import msgspec

Sampling = tuple[float, int]


class Count(msgspec.Struct, frozen=True):
    """``passed`` of ``total`` tests (or examples)."""

    passed: int
    total: int


class Ask(msgspec.Struct, frozen=True, kw_only=True):
    """One try at an attempt's candidate (the *Repeats* rule): who answers, in which prompt,
    sampled how (None: greedy); ``instead``: another model than the attempt's coder."""

    model: str
    prompt: str
    sampling: Sampling | None = None
    instead: bool = False


# --- what a check saw -------------------------------------------------------------------


class Seen(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """What a candidate's (or a draw's) check saw."""


class Again(Seen, frozen=True, kw_only=True):
    """An empty answer, or a candidate rejected before: not checked."""


class NothingToCheck(Seen, frozen=True, kw_only=True):
    """The task has no examples to run."""


class Unchanged(Seen, frozen=True, kw_only=True):
    """The answer is the starter code (a repository task asks for a change)."""


class Defect(Seen, frozen=True, kw_only=True):
    """What is wrong with the answer that needs no run to see."""

    text: str


class Examples(Seen, frozen=True, kw_only=True):
    """Its examples were run: ``count`` of them pass."""

    count: Count


Held = Unchanged | Defect
"""What holds a candidate before its grade with nothing run."""

# --- decisions --------------------------------------------------------------------------


class Decision(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A choice the policy made; ``phase`` is the one it is recorded under."""

    phase: ClassVar[str] = "code"


class Routed(Decision, frozen=True, kw_only=True):
    """One of the Router's decisions for the task, in its own words."""

    phase: ClassVar[str] = "route"
    text: str


class SecondOpinion(Decision, frozen=True, kw_only=True):
    """Attempt 2 is ``model``'s own answer to the first prompt."""

    model: str


class StartsFromBest(Decision, frozen=True, kw_only=True):
    """``attempt``'s fixer starts from attempt ``best``'s candidate, not the newest's."""

    attempt: int
    best: int
    best_grade: Count
    newest: int
    newest_grade: Count


class Repeats(Decision, frozen=True, kw_only=True):
    """``attempt``'s candidate repeats attempt ``repeats``' failed one: ``then`` is asked."""

    attempt: int
    repeats: int
    then: Ask


class StillRepeats(Decision, frozen=True, kw_only=True):
    """``attempt``'s candidate repeats attempt ``repeats``' after the tries it was given (a
    recap when ``recap``, ``resamples`` resamples, ``other``'s answer), and every try left
    did not fit the spend limit when ``unaffordable``: it is not graded again."""

    attempt: int
    repeats: int
    recap: bool
    resamples: int
    other: str | None
    unaffordable: bool = False


class HeldBack(Decision, frozen=True, kw_only=True):
    """The candidate fails its check with nothing run: ``seen``."""

    phase: ClassVar[str] = "selfcheck"
    seen: Held


class DrawVerdict(Decision, frozen=True, kw_only=True):
    """Draw ``draw`` of ``of`` (its ``sampling``) of ``attempt``: what its check saw, and
    whether it is graded in place of the attempt's candidate."""

    attempt: int
    draw: int
    of: int
    sampling: Sampling
    seen: AnySeen
    in_place: bool = False


class BestDraw(Decision, frozen=True, kw_only=True):
    """Draw ``draw`` (its ``sampling``) passed more examples than ``attempt``'s candidate
    (``count`` against ``own``): it takes the candidate's place."""

    attempt: int
    draw: int
    of: int
    sampling: Sampling
    count: Count
    own: Count


class GradedAsIs(Decision, frozen=True, kw_only=True):
    """No draw passed ``attempt``'s checks; it is graded with its best draw, or as it is."""

    attempt: int
    with_draw: bool


class DrawsStopped(Decision, frozen=True, kw_only=True):
    """``attempt``'s draws stop after ``drawn`` of ``of``: ``stale`` draws in a row brought
    nothing new (``why`` ``"stale"``), or the next draw, expected to cost ``expected``, does
    not fit the attempt's draw limit (``"draws"``: its draws spent ``spent`` of ``limit``)
    or the task's spend limit (``"spent"``: ``spent`` of ``limit``), or fits it only by
    spending the ``reserved`` the next attempt's first answer is expected to cost
    (``"reserved"``). Costs in milliseconds."""

    attempt: int
    drawn: int
    of: int
    why: Literal["stale", "draws", "spent", "reserved"]
    stale: int = 0
    spent: float = 0.0
    expected: float = 0.0
    limit: float = 0.0
    reserved: float = 0.0


class NoCode(Decision, frozen=True, kw_only=True):
    """The candidate is empty: it fails without running."""

    phase: ClassVar[str] = "grade"


class Adopted(Decision, frozen=True, kw_only=True):
    """The task's result is attempt ``best``'s candidate, not the newest (``newest``)."""

    phase: ClassVar[str] = "grade"
    best: int
    grade: Count
    newest: int


# --- endings ----------------------------------------------------------------------------


class Ending(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Why a task ends."""


class Passed(Ending, frozen=True, kw_only=True):
    """``attempt``'s candidate passed."""

    attempt: int


class LastFailed(Ending, frozen=True, kw_only=True):
    """``attempt``, the last, failed its grade."""

    attempt: int


class NoAttemptLeft(Ending, frozen=True, kw_only=True):
    """``attempt`` was the last, and was not graded."""

    attempt: int


class OverSpent(Ending, frozen=True, kw_only=True):
    """``attempt`` was the last the task could afford: the next, expected to cost
    ``expected``, does not fit its spend limit (``spent`` of ``limit``)."""

    attempt: int
    spent: float
    expected: float
    limit: float


class NoProgress(Ending, frozen=True, kw_only=True):
    """``attempt``'s fix failed the very tests ``same_as``'s did, with the same output:
    the fixes find nothing new."""

    attempt: int
    same_as: int


class Broke(Ending, frozen=True, kw_only=True):
    """A generation failed: ``error``."""

    error: str


AnySeen = Again | NothingToCheck | Unchanged | Defect | Examples
AnyDecision = (
    Routed
    | SecondOpinion
    | StartsFromBest
    | Repeats
    | StillRepeats
    | HeldBack
    | DrawVerdict
    | BestDraw
    | GradedAsIs
    | DrawsStopped
    | NoCode
    | Adopted
)
AnyEnding = Passed | LastFailed | NoAttemptLeft | OverSpent | NoProgress | Broke
EARLY: Final = (OverSpent, NoProgress)
"""The endings that stop a task before its attempts run out: the conductor records each as
a decision, so the task's capsule and event log say why it stopped."""
