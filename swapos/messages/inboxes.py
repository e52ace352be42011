"""The inbox union of each actor: exactly the messages it accepts."""

from __future__ import annotations

from swapos.messages.commands import (
    AcquireFailed,
    AcquireModel,
    CancelGeneration,
    CancelTask,
    DescribeModels,
    Generate,
    Generated,
    GenerateFailed,
    LeaseCountChanged,
    LoadUpgraded,
    LookupPrefix,
    ModelFreed,
    ModelLeased,
    ModelResident,
    ModelsDescribed,
    ModelsUnloaded,
    PhaseObserved,
    PhasesDone,
    PrefetchDone,
    PrefetchModel,
    PrefixFound,
    PrefixMissing,
    Preload,
    Preloaded,
    ReleaseLease,
    ReservationDenied,
    ReservationGranted,
    Reserve,
    ReturnReservation,
    RunPhases,
    RunTask,
    SavePrefix,
    ScheduleUpdated,
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
)
LoaderInbox = (
    AcquireModel
    | ReleaseLease
    | PrefetchModel
    | ReservationGranted
    | ReservationDenied
    | DescribeModels
    | UnloadModels
)
EvictorInbox = (
    Reserve
    | ReturnReservation
    | ModelResident
    | ModelFreed
    | LeaseCountChanged
    | LoadUpgraded
    | ScheduleUpdated
)
PrefetcherInbox = ScheduleUpdated | PrefetchDone | PhaseObserved
GeneratorInbox = Generate | CancelGeneration | PrefixFound | PrefixMissing
KVCacheInbox = LookupPrefix | SavePrefix
ClientInbox = PhasesDone | TaskDone | Preloaded | ModelsDescribed | ModelsUnloaded
RecorderInbox = AnyEvent
