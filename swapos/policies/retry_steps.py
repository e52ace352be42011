"""The retry policy's vocabulary: the settings it reads, its steps, the outcomes that
answer them and the task's state. The rules that use them are in
:mod:`swapos.policies.retry` (its docstring is the one place they are written)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Final, Literal

import msgspec

UNCHANGED: Final = "the answer is solution.py unchanged, and the task asks for a change"
"""The verdict on a repository task's candidate that is its starter code."""
NO_CODE: Final = "the model produced no code (empty or prose-only answer)"
"""The verdict on an empty answer (not run)."""

PromptKind = Literal["plan", "first", "fix", "opinion", "recap", "draw"]
"""What a :class:`Generate` step's prompt is: ``plan`` the reason phase's; ``first`` the
first prompt (brief, starter, plan); ``fix`` the coder's conversation so far (every earlier
attempt with its outcome); ``opinion`` the first prompt again, asked of a second model;
``recap`` one turn showing each failed answer once, asking for a different one; ``draw`` the
very prompt the attempt's candidate answered."""

GeneratePhase = Literal["reason", "code"]

_PHASE: Final[Mapping[PromptKind, GeneratePhase]] = {
    "plan": "reason",
    **dict.fromkeys(("first", "fix", "opinion", "recap", "draw"), "code"),
}


def resample_seed(task_id: str, attempt: int, resample: int) -> int:
    """A reproducible sampling seed for one resample (or draw) of one attempt of one task."""
    digest = hashlib.blake2b(f"{task_id}:{attempt}:{resample}".encode(), digest_size=4)
    return int.from_bytes(digest.digest(), "big")


class Rules(msgspec.Struct, frozen=True, kw_only=True):
    """The task and profile settings the rules read (``PipelineConfig``'s, by name)."""

    task_id: str
    max_attempts: int = 3
    selfcheck: bool = True
    selfcheck_retries: int = 1
    resamples: int = 2
    resample_temperature: float = 0.8
    draws: int = 0
    second_opinion: bool = False
    starter: str | None = None
    """A repository task's starter code, as a candidate identity (None: any other task)."""


# --- Steps: what the conductor is asked to do ---------------------------------------------


class Step(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Something the conductor does for the task."""


class Decide(Step, frozen=True, kw_only=True):
    """Record a decision (the event log and the capsule). Answered by :class:`Done`."""

    phase: str
    text: str


class Generate(Step, frozen=True, kw_only=True):
    """Run a generate phase of ``model`` on a ``prompt`` of that kind, for ``attempt`` (0: the
    plan); ``sampling`` is ``(temperature, seed)``, None for the phase's own; ``upcoming``
    the model uses after it (for the Prefetcher); ``base`` the attempt whose candidate the
    fixer starts from when it is not the newest graded one (rule 10; 0: the newest);
    ``then``, for a draw, the sampling of the draws that may follow it, in order (rule 7):
    a runner may decode them side by side with it, each still taken as its own step, and
    answer the step with whichever of them finished first (:attr:`Generated.drew`)."""

    model: str
    prompt: PromptKind
    attempt: int
    upcoming: tuple[str, ...] = ()
    sampling: tuple[float, int] | None = None
    base: int = 0
    then: tuple[tuple[float, int], ...] = ()

    @property
    def phase(self) -> GeneratePhase:
        """The phase run: ``reason`` or ``code``."""
        return _PHASE[self.prompt]


class Keep(Step, frozen=True, kw_only=True):
    """The newest answer is ``attempt``'s candidate (its artifact). With ``rejected``, it is
    recorded as failed with that text, never graded."""

    attempt: int
    rejected: str | None = None


class SelfCheck(Step, frozen=True, kw_only=True):
    """Run the examples of the task's docstring or brief against the newest answer."""

    attempt: int


class Replace(Step, frozen=True, kw_only=True):
    """The newest answer (a draw) takes the place of ``attempt``'s candidate; with ``key``,
    the attempt's draw of that identity (an earlier one, rule 8)."""

    attempt: int
    key: str = ""


class SendBack(Step, frozen=True, kw_only=True):
    """``attempt``'s candidate goes back to the coder: its check's failure is its verdict."""

    attempt: int
    tests_passed: int
    tests_total: int
    text: str


class Grade(Step, frozen=True, kw_only=True):
    """Grade ``attempt``'s candidate with the task's tests; ``run=False``: it is empty, and
    fails with :data:`NO_CODE` without running."""

    attempt: int
    run: bool = True


class Adopt(Step, frozen=True, kw_only=True):
    """The task's result is ``attempt``'s candidate: a copy of it goes last in the capsule."""

    attempt: int


class Finish(Step, frozen=True, kw_only=True):
    """The task ends (the outcome is the state's: :attr:`TaskState.passed`...)."""

    reason: str


Action = Decide | Generate | Keep | SelfCheck | Replace | SendBack | Grade | Adopt
"""Every step but :class:`Finish`."""

# --- Outcomes: what came of a step ------------------------------------------------------


class Outcome(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """What came of the last step."""


class Started(Outcome, frozen=True, kw_only=True):
    """The task begins, routed: whether it plans first, each role's model (``reason``,
    ``code``, ``fix``), the routing decisions and whether it has examples."""

    plan_first: bool
    models: dict[str, str]
    why: tuple[str, ...] = ()
    examples: bool = False


class Done(Outcome, frozen=True, kw_only=True):
    """A record step was carried out."""


class Generated(Outcome, frozen=True, kw_only=True):
    """A phase answered: whether its prompt was a chat; for a code phase, its candidate's
    identity and whether it is empty (no code). For a draw, ``drew`` is
    the sampling it was decoded with when that is another of the step's draws (one of its
    ``then``: decoded side by side, it finished first); None: the step's own ``sampling``."""

    chat: bool = False
    key: str = ""
    empty: bool = False
    drew: tuple[float, int] | None = None
    defect: str = ""
    """What is wrong with the candidate that needs no run to see (it does not parse, it
    lacks a name the task asks to add: :mod:`swapos.pipeline.defects`); "" when nothing."""


class Failed(Outcome, frozen=True, kw_only=True):
    """A generate phase failed (the model unusable, the prompt, the generation)."""

    error: str


class Checked(Outcome, frozen=True, kw_only=True):
    """A self-check's verdict; ``text`` what failed (for the coder). ``precheck``: nothing
    ran, the candidate failed what needs no run (it is the starter, or has a defect)."""

    passed: bool
    tests_passed: int
    tests_total: int
    text: str = ""
    precheck: bool = False


class Graded(Outcome, frozen=True, kw_only=True):
    """A grade's verdict."""

    passed: bool
    tests_passed: int
    tests_total: int


# --- The state -------------------------------------------------------------------------

At = Literal[
    "start", "routed", "planned", "tried", "kept", "checked", "drew", "draw_checked", "drawn",
    "grade", "graded", "sent_back", "adopted", "done",
]  # fmt: skip
"""Where the task is: which outcome the state waits for (see :data:`RULES`)."""


class TaskState(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the rules know of one task. Frozen: :func:`next_step` returns a new one
    (its dicts are never changed in place either)."""

    rules: Rules
    at: At = "start"
    pending: tuple[Action, ...] = ()  # record steps still to hand out before ``at`` applies
    plans: bool = False  # the task plans first
    models: dict[str, str] = msgspec.field(default_factory=dict)  # role -> model
    examples: bool = False  # it has examples to check
    attempt: int = 0  # the current attempt (0: before the first)
    upcoming: tuple[str, ...] = ()  # the current attempt's schedule for the Prefetcher
    coder: str = ""
    other: str | None = None  # who answers instead when the coder keeps repeating (rule 5)
    tried: int = 0  # which try of the attempt's candidate is out (rule 5)
    chats: dict[str, bool] = msgspec.field(default_factory=dict)  # model -> prompted as a chat
    key: str = ""  # the attempt's candidate's identity
    empty: bool = False  # ... it has no code
    defect: str = ""  # ... what is wrong with it that needs no run to see (rule 6)
    kept: int = 0  # the attempt of the capsule's newest artifact
    base: int = 0  # the attempt the current fixer starts from (rule 10; 0: the newest)
    budget: bool = False  # its check used the self-check budget (rule 8)
    check: Checked | None = None  # its failed check (rule 8)
    draw: int = 0  # how many draws of the attempt were taken (rule 7), and the newest's candidate
    drawn: tuple[tuple[float, int], ...] = ()  # the samplings of those draws, in the order taken
    draw_key: str = ""
    # the checked draw of the attempt that passed the most examples, more than its candidate
    best_draw: tuple[str, Checked, str] | None = None  # key, check, what it said
    # candidate identity -> the attempt whose grade failed / whose check failed (never graded)
    failed: dict[str, int] = msgspec.field(default_factory=dict)
    unchecked: dict[str, int] = msgspec.field(default_factory=dict)
    selfchecks: int = -1  # candidates checks may still send back (-1: not started)
    grades: int = 0  # graded candidates (an empty answer is not one)
    passed_attempt: int = 0
    last: Graded | None = None  # the newest grade
    scores: dict[int, Graded] = msgspec.field(default_factory=dict)  # attempt -> its grade
    ending: str = ""  # why the task ends, once its result is adopted (rule 10)
    error: str | None = None

    @property
    def passed(self) -> bool:
        """The task passed: its newest grade passed and nothing failed."""
        return self.last is not None and self.last.passed and self.error is None

    @property
    def best_attempt(self) -> int:
        """The attempt of the task's best candidate (rule 10; 0: none graded)."""
        return max(self.scores, key=lambda a: (self.scores[a].tests_passed, a), default=0)

    @property
    def result(self) -> Graded | None:
        """The grade of the task's result (rule 10): its passing grade, else its best
        candidate's, else its newest (an empty answer's)."""
        return self.last if self.passed or not self.scores else self.scores[self.best_attempt]

    @property
    def pass_at_1(self) -> bool:
        """It passed with its first graded candidate."""
        return self.passed and self.grades == 1

    @property
    def fresh(self) -> bool:
        """The current attempt is a second opinion (rule 4)."""
        return self.attempt == 2 and self.opinions

    @property
    def opinions(self) -> bool:
        """A failed attempt 1 is followed by a second opinion (rule 4)."""
        return self.rules.second_opinion and self.models["fix"] != self.models["code"]


Result = tuple[TaskState, list[Action | Finish]]
"""A rule's result: the new state and the steps to hand out, in order; every step but the
last is a record step (answered by :class:`Done`)."""
