"""Events: what happened, in the past tense. Every actor sends them to the Recorder, which
appends each as one JSONL line (docs/events.md). ``t`` is seconds since the run started."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import msgspec

from swapos.data.generation import GenerationStats
from swapos.messages.base import Message

SCHEMA_VERSION = 3
"""Version of the event log's line format (written in the ``RunStarted`` header).

2: ``GenerationFinished`` holds its numbers in ``stats`` (1 had them flat, with ``hit_cap``).
3: ``TaskStarted``, ``TaskFinished`` and ``PhaseStarted`` carry ``run_id``, the run of a task
they belong to (2 keyed them by ``task_id``, so two runs of one task id merged).
"""


class Event(Message, frozen=True, kw_only=True):
    """Base of all events: when, and the ids it concerns."""

    t: float
    task_id: str | None = None
    phase_id: str | None = None
    model: str | None = None
    request_id: str | None = None


# --- run and tasks ------------------------------------------------------------------------


class RunStarted(Event, frozen=True, kw_only=True):
    """The header: always the first line of a log."""

    schema_version: int = SCHEMA_VERSION
    swapos_version: str
    run_at: str
    host: dict[str, str]
    profile: str
    mode: str
    budget_bytes: int
    models: list[str]
    overhead_bytes: int = 0  # the process's fixed share of a process budget (0: none)


class RunFinished(Event, frozen=True, kw_only=True):
    pass


class TaskStarted(Event, frozen=True, kw_only=True):
    """A run of a task started. ``run_id`` names this run (one task id may run many times,
    even at once); ``task_id`` is the task's own name."""

    run_id: str | None = None
    category: str = ""


class TaskFinished(Event, frozen=True, kw_only=True):
    """A task ended. ``pass_at_1``: its first graded candidate passed; ``passed_attempt``:
    the code attempt whose candidate passed (0: none); ``grades``: runs of its tests."""

    run_id: str | None = None
    passed: bool
    pass_at_1: bool = False
    iterations: int = 0
    tests_passed: int = 0
    tests_total: int = 0
    error: str | None = None
    passed_attempt: int = 0
    grades: int = 0


class PhaseStarted(Event, frozen=True, kw_only=True):
    """A phase of the run ``run_id`` started (its later events name it by ``phase_id``)."""

    run_id: str | None = None
    phase: str
    attempt: int = 0


class PhaseFinished(Event, frozen=True, kw_only=True):
    outcome: str = "ok"
    error: str | None = None
    peak_rss_bytes: int = 0


class RouterDecided(Event, frozen=True, kw_only=True):
    """The Router chose a plan or a model; ``text`` says what and why."""

    decision: str
    text: str


class SchedulePublished(Event, frozen=True, kw_only=True):
    models: list[str]


# --- Loader / Evictor ---------------------------------------------------------------------


class LeaseGranted(Event, frozen=True, kw_only=True):
    lease_id: str
    load_s: float
    evict_s: float
    load_hidden_s: float
    joined: bool


class LeaseReleased(Event, frozen=True, kw_only=True):
    lease_id: str


class ModelLoadStarted(Event, frozen=True, kw_only=True):
    """A load started; ``n_ctx``: the context it loads the model with (a request that needs
    more than a loaded model's context reloads it with a larger one; 0 in older logs)."""

    speculative: bool
    estimate_bytes: int
    device_estimate_bytes: int = 0
    n_ctx: int = 0


class ModelLoaded(Event, frozen=True, kw_only=True):
    """A load finished; ``speculative``: it was started by a prefetch (even if a phase
    joined it before it finished)."""

    load_s: float
    speculative: bool
    estimate_bytes: int
    measured_bytes: int
    device_estimate_bytes: int = 0  # GPU memory (offloaded layers), estimated and measured
    measured_device_bytes: int = 0
    upload_s: float = 0.0  # the share of load_s spent uploading layers to the device
    device: str = ""  # the device they went to ("" for a CPU-only load)
    n_ctx: int = 0  # the context it was loaded with (0 in older logs)


class ModelLoadFailed(Event, frozen=True, kw_only=True):
    reason: str


class ModelLoadCancelled(Event, frozen=True, kw_only=True):
    reason: str


class ModelEvictStarted(Event, frozen=True, kw_only=True):
    reason: str


class ModelEvicted(Event, frozen=True, kw_only=True):
    evict_s: float
    reason: str


class ReservationMade(Event, frozen=True, kw_only=True):
    nbytes: int
    urgent: bool
    victims: list[str]
    cancel: list[str]
    used_bytes: int
    budget_bytes: int
    device_nbytes: int = 0
    device_used_bytes: int = 0
    device_budget_bytes: int = 0


class ReservationRefused(Event, frozen=True, kw_only=True):
    urgent: bool
    reason: str


class PrefetchStarted(Event, frozen=True, kw_only=True):
    kind: Literal["load", "warm"]
    reason: str = ""


class PrefetchFinished(Event, frozen=True, kw_only=True):
    kind: Literal["load", "warm"]
    outcome: str
    duration_s: float


# --- Generator / KVCache ------------------------------------------------------------------


class GenerationStarted(Event, frozen=True, kw_only=True):
    prompt_chars: int


class FirstToken(Event, frozen=True, kw_only=True):
    ttft_s: float


class GenerationProgress(Event, frozen=True, kw_only=True):
    tokens: int
    text_tail: str = ""


class GenerationFinished(Event, frozen=True, kw_only=True):
    """A generation ended; ``stats`` are the numbers the backend measured."""

    stats: GenerationStats


class GenerationFailed(Event, frozen=True, kw_only=True):
    reason: str


class KVHit(Event, frozen=True, kw_only=True):
    """A lookup offered a state sharing ``tokens`` with the prompt (sent by the KVCache)."""

    tokens: int
    tier: str = "ram"


class KVMiss(Event, frozen=True, kw_only=True):
    """A lookup found no state to offer (sent by the KVCache only)."""

    prompt_tokens: int
    reason: str = ""


class KVRestoreFailed(Event, frozen=True, kw_only=True):
    """The backend could not use the state a lookup offered (``tokens`` in common with the
    prompt) and prefilled the whole prompt: that lookup ends a miss."""

    tokens: int
    reason: str


class KVSaved(Event, frozen=True, kw_only=True):
    tokens: int
    nbytes: int
    tier: str = "ram"


class KVDropped(Event, frozen=True, kw_only=True):
    tokens: int
    nbytes: int
    reason: str
    tier: str = "ram"


# --- grading ------------------------------------------------------------------------------


class GradeStarted(Event, frozen=True, kw_only=True):
    attempt: int = 0


class GradeFinished(Event, frozen=True, kw_only=True):
    outcome: str
    passed: bool
    tests_passed: int
    tests_total: int
    duration_s: float
    reason: str = ""


AnyEvent = (
    RunStarted
    | RunFinished
    | TaskStarted
    | TaskFinished
    | PhaseStarted
    | PhaseFinished
    | RouterDecided
    | SchedulePublished
    | LeaseGranted
    | LeaseReleased
    | ModelLoadStarted
    | ModelLoaded
    | ModelLoadFailed
    | ModelLoadCancelled
    | ModelEvictStarted
    | ModelEvicted
    | ReservationMade
    | ReservationRefused
    | PrefetchStarted
    | PrefetchFinished
    | GenerationStarted
    | FirstToken
    | GenerationProgress
    | GenerationFinished
    | GenerationFailed
    | KVHit
    | KVMiss
    | KVRestoreFailed
    | KVSaved
    | KVDropped
    | GradeStarted
    | GradeFinished
)
"""Every event type: the Recorder's inbox and the event log's line type."""

EVENT_DECODER = msgspec.json.Decoder(AnyEvent)
"""The typed decoder for one event-log line (of the current :data:`SCHEMA_VERSION`)."""

_RAW_DECODER = msgspec.json.Decoder()


def event_decoder(schema_version: int) -> Callable[[bytes], AnyEvent]:
    """The line decoder for a log whose header says ``schema_version``: older lines are
    upgraded to today's events as they are read. (A newer version is the caller's to refuse.)
    """
    if schema_version >= SCHEMA_VERSION:
        return EVENT_DECODER.decode
    return lambda line: _decode_old(line, schema_version)


_TASK_EVENTS = ("TaskStarted", "TaskFinished", "PhaseStarted")


def _decode_old(line: bytes, version: int) -> AnyEvent:
    """One line of a schema-``version`` log, upgraded step by step.

    1 -> 2: ``GenerationFinished`` carried its numbers flat, with ``hit_cap``.
    2 -> 3: task-level events had no ``run_id``: a task id ran once per log (at a time), so
    the task id is the run id.

    Raises:
        msgspec.DecodeError: the line is not a valid event (as the typed decoder would).
    """
    raw = _RAW_DECODER.decode(line)
    if isinstance(raw, dict):
        kind = raw.get("type")
        if version < 2 and kind == "GenerationFinished" and "stats" not in raw:
            raw.pop("hit_cap", None)
            raw["stats"] = {k: raw.pop(k) for k in GenerationStats.__struct_fields__ if k in raw}
        if version < 3 and kind in _TASK_EVENTS and raw.get("run_id") is None:
            raw["run_id"] = raw.get("task_id")
    event: AnyEvent = msgspec.convert(raw, AnyEvent)
    return event
