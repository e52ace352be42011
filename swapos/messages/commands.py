"""Commands and replies between actors (events live in :mod:`swapos.messages.events`).

Request/reply edges form a DAG: Router -> Loader -> Evictor, Router -> Generator -> KVCache,
Prefetcher -> Loader, client -> Router. One-way notifications flow the same way.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from swapos.data.generation import GenerationStats
from swapos.data.prefix import PrefixState
from swapos.data.residency import LedgerEntry, ModelState, RoomPlan
from swapos.data.sampling import SamplingParams
from swapos.data.task import Task
from swapos.messages.base import Message, Reply, Request, new_id
from swapos.messages.events import LeaseGranted

# --- client -> Router ---------------------------------------------------------------------


class PhaseSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One generate phase of a scripted sequence: which model, what prompt."""

    phase: str
    model: str
    prompt: str
    stable_prefix: str = ""
    params: SamplingParams = SamplingParams()
    special: bool = False  # the prompt is a rendered chat: its special-token text is tokens
    n_ctx: int = 0
    """The context the phase needs (prompt and answer, ``policies/contexts.py``): a model
    loaded with less is reloaded with more, up to its cap; 0: whatever it is loaded with."""


class RunPhases(Request, frozen=True, kw_only=True):
    """Run ``phases`` one after the other for ``task_id``, prefetching along the way.

    ``then``: models expected after the last phase, soonest first (``swapos serve``'s queued
    and predicted models); they follow the phases' own models in the published schedule.
    ``CancelTask`` with this ``request_id`` stops the phases (the running one within a token).
    ``run_id`` names this run in the records (``task_id`` is only a label: two runs of one
    task id, even at once, are recorded apart).
    """

    task_id: str
    phases: list[PhaseSpec]
    then: list[str] = msgspec.field(default_factory=list)
    run_id: str = msgspec.field(default_factory=lambda: new_id("run"))


class PhasesDone(Reply, frozen=True, kw_only=True):
    """The phases ran (records come from the Recorder, the single source of numbers)."""

    task_id: str
    outputs: list[str]
    error: str | None = None


class RunTask(Request, frozen=True, kw_only=True):
    """Conduct ``task`` through the coding pipeline (reason, code, grade, critic, ...).

    ``next_task``: the task the caller will run after this one, when it knows; its first
    model is then part of this task's schedule (a hint for prefetch and eviction).
    ``run_id`` names this run of the task in the records (one task may run many times).
    """

    task: Task
    max_attempts: int | None = None
    next_task: Task | None = None
    run_id: str = msgspec.field(default_factory=lambda: new_id("run"))


class CancelTask(Message, frozen=True, kw_only=True):
    """Stop the task that ``RunTask`` (or ``RunPhases``) ``request_id`` started: its phase
    aborts within one token, its lease is released, its grading sandbox killed; it is
    recorded as cancelled."""

    request_id: str


class TaskDone(Reply, frozen=True, kw_only=True):
    """The task ended; its :class:`TaskResult` is read from the Recorder."""

    task_id: str
    passed: bool
    error: str | None = None
    capsule_json: bytes = b""


class Preload(Request, frozen=True, kw_only=True):
    """Load ``models`` now (resident mode); replies :class:`Preloaded`."""

    models: list[str]


class Preloaded(Reply, frozen=True, kw_only=True):
    failed: dict[str, str] = msgspec.field(default_factory=dict)


# --- client -> Loader: residency queries and unloads (swapos serve) ---------------------


class DescribeModels(Request, frozen=True, kw_only=True):
    """Ask the Loader for every model's state; replies :class:`ModelsDescribed`."""


class ModelsDescribed(Reply, frozen=True, kw_only=True):
    models: list[ModelState]


class UnloadModels(Request, frozen=True, kw_only=True):
    """Evict ``models`` (every model when None) that are loaded and leased by nobody;
    replies :class:`ModelsUnloaded`. The caller waits for its own leases first: a model
    still leased, loading or evicting is left alone and named in ``skipped``."""

    models: list[str] | None = None


class ModelsUnloaded(Reply, frozen=True, kw_only=True):
    unloaded: list[str]
    skipped: dict[str, str] = msgspec.field(default_factory=dict)  # model -> why


# --- Router/Prefetcher -> Loader ---------------------------------------------------------


class AcquireModel(Request, frozen=True, kw_only=True):
    """Lease ``model`` (load it if needed). A leased model is pinned until released.
    ``n_ctx``: the context the requester needs (0: any); a model loaded with less is
    reloaded with a larger one first (``policies/contexts.py``)."""

    model: str
    task_id: str | None = None
    phase_id: str | None = None
    n_ctx: int = 0


class ModelLeased(Reply, frozen=True, kw_only=True):
    """The model is ready and pinned. ``grant`` is the event the Loader logged: the lease id
    and what the requester waited for (load, eviction, hidden load)."""

    grant: LeaseGranted


class AcquireFailed(Reply, frozen=True, kw_only=True):
    model: str
    reason: str


class ReleaseLease(Message, frozen=True, kw_only=True):
    lease_id: str


class PrefetchModel(Request, frozen=True, kw_only=True):
    """Speculatively load ``model`` if the Evictor grants room without hurting sooner uses.

    With ``warm_only`` nothing is loaded: the reply only says whether the model is already
    resident or loading (else ``denied``), so the Prefetcher warms only what needs it."""

    model: str
    warm_only: bool = False


PrefetchOutcome = Literal["loaded", "resident", "joined", "denied", "failed", "cancelled"]


class PrefetchDone(Reply, frozen=True, kw_only=True):
    """The end of a prefetch; for a ``loaded`` one, how its load split into the file read
    (``read_s``: page cache or disk, and everything else on the host) and the upload of
    offloaded layers to ``device`` (``upload_s``; 0 and "" on a CPU-only load)."""

    model: str
    outcome: PrefetchOutcome
    reason: str = ""
    read_s: float = 0.0
    upload_s: float = 0.0
    device: str = ""


# --- Loader -> Evictor --------------------------------------------------------------------


class PlanRoom(Request, frozen=True, kw_only=True):
    """Which models must go for ``nbytes`` of ``model`` to fit? ``claims`` is the Loader's
    ledger (every other model holding budget) at the time of asking, under its budget; the
    Evictor keeps no copy. Urgent: a phase waits for the model; else a prefetch, which may
    only displace models needed later than itself."""

    model: str
    nbytes: int
    urgent: bool
    claims: list[LedgerEntry]
    budget_bytes: int
    device_nbytes: int = 0  # its claim on GPU memory (offloaded layers and their KV)
    device_budget_bytes: int = 0


class RoomPlanned(Reply, frozen=True, kw_only=True):
    """The Evictor's decision: ``plan`` (possibly empty), or None when ``model`` cannot fit
    now without evicting a leased model (or, for a prefetch, one needed sooner)."""

    model: str
    plan: RoomPlan | None


# --- Router -> Prefetcher / Evictor -------------------------------------------------------


class ModelUse(msgspec.Struct, frozen=True, kw_only=True):
    """One upcoming use of a model: ``order`` 0 is the phase running now."""

    model: str
    order: int
    task_id: str = ""
    phase: str = ""


class PhaseObserved(Message, frozen=True, kw_only=True):
    """A generate phase ended: what it cost (feeds the Prefetcher's cost model)."""

    model: str
    tokens: int
    gen_s: float
    started_t: float
    ended_t: float
    load_s: float
    load_hidden_s: float


class ScheduleUpdated(Message, frozen=True, kw_only=True):
    """The upcoming model uses, soonest first."""

    uses: list[ModelUse]


# --- Router -> Generator -> KVCache -------------------------------------------------------


class Generate(Request, frozen=True, kw_only=True):
    """Generate with the model held by ``lease_id`` (``special``: the prompt is a rendered
    chat, whose special-token text is tokenized as special tokens). ``at_first_token``: the
    Router's schedule, which the Generator sends to the Prefetcher once the first token is
    out (or the generation ended without one), so that a speculative load never competes
    with this generation's prefill."""

    lease_id: str
    model: str
    prompt: str
    stable_prefix: str = ""
    params: SamplingParams = SamplingParams()
    task_id: str | None = None
    phase_id: str | None = None
    special: bool = False
    at_first_token: ScheduleUpdated | None = None


class Generated(Reply, frozen=True, kw_only=True):
    """The generation's text and its numbers (also logged as ``GenerationFinished``)."""

    text: str
    stats: GenerationStats


class GenerateFailed(Reply, frozen=True, kw_only=True):
    reason: str


class CancelGeneration(Message, frozen=True, kw_only=True):
    """Stop the generation ``Generate`` ``request_id`` started, within one token."""

    request_id: str


class DrawSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One draw of :class:`GenerateDraws`: how it samples (its own seed) and the phase its
    events are recorded under (each draw is a phase of its own, as a draw in turn is)."""

    params: SamplingParams
    phase_id: str | None = None


class GenerateDraws(Request, frozen=True, kw_only=True):
    """Generate several sampled draws of one prompt with the model held by ``lease_id``:
    side by side when the model can (one sequence each, sharing the prompt's KV cells; at
    most ``side_by_side`` at once, 0: all), otherwise in turn. Each draw is replied as
    :class:`DrawFinished` as soon as it ends, while the others go on; then one
    :class:`DrawsDone` (or a :class:`GenerateFailed`). :class:`StopDraws` drops the draws
    still running (the caller's draw passed its check); :class:`CancelGeneration` cancels
    the whole request."""

    lease_id: str
    model: str
    prompt: str
    draws: list[DrawSpec]
    side_by_side: int = 0
    task_id: str | None = None
    special: bool = False


class DrawFinished(Reply, frozen=True, kw_only=True):
    """One draw of a :class:`GenerateDraws`, as soon as it ended (also logged as that draw's
    ``GenerationFinished``)."""

    index: int
    text: str
    stats: GenerationStats


class DrawsDone(Reply, frozen=True, kw_only=True):
    """Every draw of a :class:`GenerateDraws` finished or was stopped.

    Attributes:
        finished: the indices of the draws replied, in the order they finished.
        stopped: the indices of the draws dropped by :class:`StopDraws` (never started or
            cut off before their end).
        side_by_side: the most draws decoded at once (1: in turn).
    """

    finished: list[int]
    stopped: list[int]
    side_by_side: int


class StopDraws(Message, frozen=True, kw_only=True):
    """Drop the draws of ``GenerateDraws`` ``request_id`` still running, within one step;
    those already finished stay replied."""

    request_id: str


class LookupPrefix(Request, frozen=True, kw_only=True):
    """The saved state for ``identity`` sharing the longest common prefix with ``tokens``.

    A state whose tokens diverge from ``tokens`` (it will be truncated on restore) is only
    offered when it shares at least the KVCache's ``min_common_tokens`` with them and, for a
    model with a sliding attention ``window`` (its ``kv_window``; None: none), when the state
    is no longer than the window.
    """

    identity: str
    tokens: list[int]
    window: int | None = None


class PrefixFound(Reply, frozen=True, kw_only=True):
    """A state to restore; ``common_tokens`` of its tokens match the prompt (0: unknown)."""

    state: PrefixState
    tier: Literal["ram", "disk"] = "ram"
    common_tokens: int = 0


class PrefixMissing(Reply, frozen=True, kw_only=True):
    pass


class SavePrefix(Message, frozen=True, kw_only=True):
    identity: str
    state: PrefixState
    model: str | None = None


# --- Loader -> KVCache: the process budget ------------------------------------------------


class ResizeKVRam(Request, frozen=True, kw_only=True):
    """Set the KV cache's RAM tier budget to ``budget_bytes``: what the process budget has
    left once its fixed overhead and the models' claims are counted. The tier drops its
    least recently used states to fit (it yields to models), then replies."""

    budget_bytes: int


class KVRamResized(Reply, frozen=True, kw_only=True):
    """The RAM tier fits ``budget_bytes``: ``dropped`` states (``dropped_bytes``) left it,
    ``nbytes`` remain."""

    budget_bytes: int
    dropped: int = 0
    dropped_bytes: int = 0
    nbytes: int = 0
