"""The retry policy's vocabulary: the settings it reads, its steps and the outcomes that
answer them. The rules that use them are in :mod:`swapos.policies.retry` (its docstring is
the one place they are written); what a step decides is a typed value
(:mod:`swapos.policies.retry_decisions`), put in words at the edge
(:mod:`swapos.policies.retry_text`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Final, Literal

import msgspec

from swapos.policies.retry_decisions import AnyDecision, AnyEnding, Sampling
from swapos.policies.spending import UNMEASURED, ModelCost

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
    side_by_side: bool = True
    starter: str | None = None
    """A repository task's starter code, as a candidate identity (None: any other task)."""
    task_budget: float = 0.0
    """The task's spend limit, as a multiple of its first code answer's cost (*Spend*;
    :mod:`swapos.policies.spending`); 0: none."""
    task_seconds: float = 0.0
    """The task's spend limit in seconds at the models' costs (*Spend*); 0: none."""

    @property
    def spend_limited(self) -> bool:
        return self.task_budget > 0 or self.task_seconds > 0

    stale_draws: int = 0
    """An attempt's draws stop after this many in a row brought nothing new (*Draws*);
    0: never."""
    draw_seconds: float = 0.0
    """What an attempt's draws may cost in all, in seconds at the models' costs (*Spend*:
    long answers get fewer draws than short ones); 0: no limit."""
    stop_same_failure: bool = False
    """A fix whose grade fails with the same test output as the grade before it ends the
    task (*Grade*)."""
    reserve_next: bool = False
    """An attempt's draws leave the task's spend limit room for the next attempt's first
    answer (*Spend*)."""
    price_attempts: bool = True
    """With a spend limit, a next attempt is priced by the prompt it sends before it is
    asked (*Spend*)."""
    count_wall: bool = True
    """The task's spend is at least its wall-clock so far (*Spend*: grades, checks, loads
    and the estimates' error count too)."""
    costs: dict[str, ModelCost] = msgspec.field(default_factory=dict)
    """Each model's measured token costs (a model not here: :data:`~swapos.policies.
    spending.UNMEASURED`)."""

    def cost_of(self, model: str) -> ModelCost:
        return self.costs.get(model, UNMEASURED)


# --- Steps: what the conductor is asked to do ---------------------------------------------


class Step(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Something the conductor does for the task."""


class Decide(Step, frozen=True, kw_only=True):
    """Record a decision (the event log and the capsule, in its words:
    :func:`swapos.policies.retry_text.said`). Answered by :class:`Done`."""

    decision: AnyDecision

    @property
    def phase(self) -> str:
        """The phase the decision is recorded under (``route``, ``code``...)."""
        return self.decision.phase


class Generate(Step, frozen=True, kw_only=True):
    """Run a generate phase of ``model`` on a ``prompt`` of that kind, for ``attempt`` (0: the
    plan); ``sampling`` is ``(temperature, seed)``, None for the phase's own; ``upcoming``
    the model uses after it (for the Prefetcher); ``base`` the attempt whose candidate the
    fixer starts from when it is not the newest graded one (the *Best candidate* rule; 0:
    the newest); ``then``, for a draw, the sampling of the draws that may follow it, in order
    (the *Draws* rule): a runner may decode them side by side with it, each still taken as
    its own step, and answer the step with whichever of them finished first
    (:attr:`Generated.drew`)."""

    model: str
    prompt: PromptKind
    attempt: int
    upcoming: tuple[str, ...] = ()
    sampling: Sampling | None = None
    base: int = 0
    then: tuple[Sampling, ...] = ()

    @property
    def phase(self) -> GeneratePhase:
        """The phase run: ``reason`` or ``code``."""
        return _PHASE[self.prompt]


class Price(Step, frozen=True, kw_only=True):
    """Build ``step``'s prompt and say what it would prefill, generating nothing: the policy
    prices a next attempt's first answer by the prompt it sends (*Spend*). Answered by
    :class:`Priced`."""

    step: Generate


class Keep(Step, frozen=True, kw_only=True):
    """The newest answer is ``attempt``'s candidate (its artifact). With ``repeats``, it is
    the same as that attempt's failed candidate: recorded as failed
    (:func:`swapos.policies.retry_text.identical`), never graded."""

    attempt: int
    repeats: int = 0


class SelfCheck(Step, frozen=True, kw_only=True):
    """Run the examples of the task's docstring or brief against the newest answer."""

    attempt: int


class Replace(Step, frozen=True, kw_only=True):
    """The newest answer (a draw) takes the place of ``attempt``'s candidate; with ``key``,
    the attempt's draw of that identity (an earlier one: the *Sent back* rule)."""

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
    fails with :data:`~swapos.policies.retry_text.NO_CODE` without running."""

    attempt: int
    run: bool = True


class Adopt(Step, frozen=True, kw_only=True):
    """The task's result is ``attempt``'s candidate: a copy of it goes last in the capsule."""

    attempt: int


class Finish(Step, frozen=True, kw_only=True):
    """The task ends, and why (the outcome is the state's: ``TaskState.passed``...)."""

    ending: AnyEnding


Action = Decide | Generate | Price | Keep | SelfCheck | Replace | SendBack | Grade | Adopt
"""Every step but :class:`Finish`."""
RECORDS: Final = (Decide, Keep, Replace, SendBack, Adopt)
"""The steps that record and are answered by :class:`Done`."""

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
    identity and whether it is empty (no code). For a draw, ``drew`` is the sampling it was
    decoded with when that is another of the step's draws (one of its ``then``: decoded
    side by side, it finished first); None: the step's own ``sampling``."""

    chat: bool = False
    key: str = ""
    empty: bool = False
    drew: Sampling | None = None
    defect: str = ""
    """What is wrong with the candidate that needs no run to see (it does not parse, it
    lacks a name the task asks to add: a pre-grade check pass); "" when nothing."""
    model: str = ""
    tokens: int = 0
    prefilled: int = 0
    """The model that answered, the tokens it generated and the prompt tokens it prefilled
    (not restored from the KV cache): what the answer cost (*Spend*)."""


class Priced(Outcome, frozen=True, kw_only=True):
    """What a :class:`Price` step's prompt would cost to read: its tokens less the prefix it
    shares with a prompt the task sent that model before (what the KV cache can restore)."""

    prefill: int


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
    failure: str = ""
    """A digest of the failed tests' output (timings and addresses taken out): two grades
    with the same one failed the same way ("" when it passed or was not run)."""
