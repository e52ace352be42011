"""The inbox union of each actor: exactly the messages it accepts."""

from __future__ import annotations

from swapos.messages.commands import (
    AcquireFailed,
    AcquireModel,
    CancelGeneration,
    CancelTask,
    DescribeModels,
    DrawFinished,
    DrawsDone,
    Generate,
    Generated,
    GenerateDraws,
    GenerateFailed,
    KVRamResized,
    LookupPrefix,
    ModelLeased,
    ModelsDescribed,
    ModelsUnloaded,
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
    ResizeKVRam,
    RoomPlanned,
    RunPhases,
    RunTask,
    SavePrefix,
    ScheduleUpdated,
    StopDraws,
    TaskDone,
    UnloadModels,
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
    | DrawFinished
    | DrawsDone
)
LoaderInbox = (
    AcquireModel
    | ReleaseLease
    | PrefetchModel
    | RoomPlanned
    | DescribeModels
    | UnloadModels
    | KVRamResized
)
EvictorInbox = PlanRoom | ScheduleUpdated
PrefetcherInbox = ScheduleUpdated | PrefetchDone | PhaseObserved
GeneratorInbox = (
    Generate | GenerateDraws | StopDraws | CancelGeneration | PrefixFound | PrefixMissing
)
KVCacheInbox = LookupPrefix | SavePrefix | ResizeKVRam
ClientInbox = PhasesDone | TaskDone | Preloaded | ModelsDescribed | ModelsUnloaded
RecorderInbox = AnyEvent
