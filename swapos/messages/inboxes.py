"""The inbox union of each actor: exactly the messages it accepts."""

from __future__ import annotations

from swapos.messages.commands import (
    AcquireFailed,
    AcquireModel,
    CancelGeneration,
    CancelTask,
    Generate,
    Generated,
    GenerateFailed,
    LookupPrefix,
    ModelLeased,
    PhaseObserved,
    PhasesDone,
    PlanRoom,
    PrefetchDone,
    PrefetchModel,
    PrefixFound,
    PrefixMissing,
    Preload,
    Preloaded,
    ReleaseLease,
    RoomPlanned,
    RunPhases,
    RunTask,
    SavePrefix,
    ScheduleUpdated,
    TaskDone,
)
from swapos.messages.events import AnyEvent

RouterInbox = (
    RunPhases
    | RunTask
    | CancelTask
    | Preload
    | ModelLeased
    | AcquireFailed
    | Generated
    | GenerateFailed
)
LoaderInbox = AcquireModel | ReleaseLease | PrefetchModel | RoomPlanned
EvictorInbox = PlanRoom | ScheduleUpdated
PrefetcherInbox = ScheduleUpdated | PrefetchDone | PhaseObserved
GeneratorInbox = Generate | CancelGeneration | PrefixFound | PrefixMissing
KVCacheInbox = LookupPrefix | SavePrefix
ClientInbox = PhasesDone | TaskDone | Preloaded
RecorderInbox = AnyEvent
