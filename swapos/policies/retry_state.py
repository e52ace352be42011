"""What the retry policy knows of one task: the task machine's state (:class:`TaskState`)
and, inside it, the current attempt's (:class:`AttemptState`). Both are frozen and written
by :func:`swapos.policies.retry.next_step` alone; ``at`` is where each machine is (the
states of :mod:`swapos.policies.retry_tables`)."""

from __future__ import annotations

import msgspec

from swapos.policies.retry_decisions import AnyEnding, Sampling
from swapos.policies.retry_steps import Action, Checked, Finish, Graded, Rules
from swapos.policies.spending import Spend


class Route(msgspec.Struct, frozen=True, kw_only=True):
    """How the task was routed: whether it plans first, each role's model (``reason``,
    ``code``, ``fix``) and whether it has examples to check."""

    plans: bool = False
    models: dict[str, str] = msgspec.field(default_factory=dict)
    examples: bool = False


class Candidate(msgspec.Struct, frozen=True, kw_only=True):
    """A code answer as the rules see it: its identity, whether it is empty, and what is
    wrong with it that needs no run to see ("" when nothing)."""

    key: str = ""
    empty: bool = False
    defect: str = ""


class BestDraw(msgspec.Struct, frozen=True, kw_only=True):
    """The checked draw of an attempt that passed the most examples, more than its
    candidate: its identity, its check, and which draw it was (``number`` of the attempt's,
    with its ``sampling``)."""

    key: str
    check: Checked
    number: int
    sampling: Sampling


class Draws(msgspec.Struct, frozen=True, kw_only=True):
    """An attempt's draws: the samplings taken, in order; the newest draw's identity; the
    best one so far."""

    taken: tuple[Sampling, ...] = ()
    newest: str = ""
    best: BestDraw | None = None
    stale: int = 0
    """Draws in a row, up to the newest, that brought nothing new (empty, a rejected
    candidate again, the starter unchanged)."""
    spent: float = 0.0
    """What the draws cost (milliseconds at the models' costs)."""


class AttemptState(msgspec.Struct, frozen=True, kw_only=True):
    """One attempt: who answers (``coder``; ``other``, the model asked instead when the
    coder keeps repeating), the Prefetcher's schedule while it does, the attempt its fixer
    starts from (``base``; 0: the newest), which try is out, whether its check used the
    check budget, its candidate's failed check, and its draws."""

    at: str = "begin"
    coder: str
    other: str | None = None
    upcoming: tuple[str, ...] = ()
    base: int = 0
    tried: int = 0
    budget: bool = False
    check: Checked | None = None
    draws: Draws = msgspec.field(default_factory=Draws)
    spend: Spend = msgspec.field(default_factory=Spend)
    """This attempt's answers (its candidate, its tries and its draws): what they cost."""
    priced: float = 0.0
    """What its first answer was priced at, by its prompt, when that did not fit the spend
    limit (*Spend*; 0: it was not refused)."""


class TaskState(msgspec.Struct, frozen=True, kw_only=True):
    """One task, between two steps.

    Attributes:
        rules: the settings the rules read.
        at: where the task machine is.
        pending: record steps still to hand out before ``at`` applies.
        route: how the task was routed.
        attempt: the current attempt (0: before the first).
        current: the current attempt's state (the last one's, once the task ends).
        chats: model -> whether it was prompted as a chat.
        candidate: the newest answer taken as an attempt's candidate.
        kept: the attempt of the capsule's newest artifact.
        failed: candidate identity -> the attempt whose grade failed.
        unchecked: candidate identity -> the attempt whose check failed (never graded).
        checks_left: candidates the checks may still send back.
        grades: graded candidates (an empty answer is not one).
        scores: attempt -> its grade.
        last: the newest grade.
        ending: why the task ends, once it does.
        error: the generation failure that ended it.
        spend: every answer so far (the plan's included): what they cost.
        code_spend: the code answers: what a next attempt is expected to cost.
        first: the cost of the first code answer (the spend limit's unit).
        wall: the task's wall-clock so far in milliseconds, as its conductor last said.
    """

    rules: Rules
    at: str = "start"
    pending: tuple[Action | Finish, ...] = ()
    route: Route = msgspec.field(default_factory=Route)
    attempt: int = 0
    current: AttemptState | None = None
    chats: dict[str, bool] = msgspec.field(default_factory=dict)
    candidate: Candidate = msgspec.field(default_factory=Candidate)
    kept: int = 0
    failed: dict[str, int] = msgspec.field(default_factory=dict)
    unchecked: dict[str, int] = msgspec.field(default_factory=dict)
    checks_left: int = -1
    grades: int = 0
    scores: dict[int, Graded] = msgspec.field(default_factory=dict)
    last: Graded | None = None
    ending: AnyEnding | None = None
    error: str | None = None
    spend: Spend = msgspec.field(default_factory=Spend)
    code_spend: Spend = msgspec.field(default_factory=Spend)
    first: float = 0.0
    wall: float = 0.0

    @property
    def spent(self) -> float:
        """What the task has spent, in milliseconds (*Spend*): its answers' cost, or its
        wall so far where that is more and ``count_wall`` is on."""
        if self.rules.count_wall:
            return max(self.spend.cost, self.wall)
        return self.spend.cost

    @property
    def passed(self) -> bool:
        """The task passed: its newest grade passed and nothing failed."""
        return self.last is not None and self.last.passed and self.error is None

    @property
    def passed_attempt(self) -> int:
        """The attempt that passed (0: none)."""
        return self.attempt if self.passed else 0

    @property
    def best_attempt(self) -> int:
        """The attempt of the task's best candidate (the *Best candidate* rule; 0: none
        graded)."""
        return max(self.scores, key=lambda a: (self.scores[a].tests_passed, a), default=0)

    @property
    def result(self) -> Graded | None:
        """The grade of the task's result: its passing grade, else its best candidate's,
        else its newest (an empty answer's)."""
        return self.last if self.passed or not self.scores else self.scores[self.best_attempt]

    @property
    def pass_at_1(self) -> bool:
        """It passed with its first graded candidate."""
        return self.passed and self.grades == 1

    @property
    def opinions(self) -> bool:
        """A failed attempt 1 is followed by a second opinion (the *Second opinion* rule)."""
        return self.rules.second_opinion and self.route.models["fix"] != self.route.models["code"]

    @property
    def fresh(self) -> bool:
        """The current attempt is a second opinion."""
        return self.attempt == 2 and self.opinions

    @property
    def now(self) -> AttemptState:
        """The current attempt's state (only while there is one)."""
        assert self.current is not None, "no attempt has begun"
        return self.current
