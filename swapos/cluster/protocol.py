"""What the Ray driver and its workers say to each other: msgspec Structs, sent as msgpack.

Everything crossing a process (or machine) boundary is plain data encoded here, so it is
validated when decoded and never depends on pickling SwapOS objects.
"""

from __future__ import annotations

import msgspec

from swapos.data.task import Task
from swapos.models.profile import Profile
from swapos.records.schema import RunInfo, TaskResult

Key = tuple[str, str]
"""(mode, arm)."""


class ClusterMessage(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Base of every driver/worker message."""


class WorkerConfig(ClusterMessage, frozen=True, kw_only=True):
    """How a worker opens its systems.

    Attributes:
        name: the worker's name in the run (``w0``, ``w1``...).
        profile: the ``pipeline`` arm's profile, as the driver resolved it (bundled models
            are assembled on the worker's node, into its own cache).
        keys: the mode/arms it opens a system for.
        cpus: CPUs Ray gave it; models without ``threads`` in the profile use this many.
        async_backend: ``asyncio`` or ``trio``: the event loop its systems run on.
        log_dir: a folder every node mounts: event logs are written there directly
            (``<log_dir>/<mode>-<arm>/events-<name>.jsonl``). Empty: the worker writes them
            to a local temporary folder and hands them back when it closes.
        max_attempts: code attempts of the ``pipeline`` arm (None: the profile's).
    """

    name: str
    profile: Profile
    keys: list[Key]
    cpus: int = 1
    async_backend: str = "asyncio"
    log_dir: str = ""
    max_attempts: int | None = None


class WorkItem(ClusterMessage, frozen=True, kw_only=True):
    """Run ``task`` in every mode/arm of ``keys``, in that order, on one worker (so a
    task's modes stay paired on one machine). ``next_task``: what the driver expects that
    worker to run next (a prefetch hint, may be wrong)."""

    task: Task
    keys: list[Key]
    next_task: Task | None = None


class WorkerReady(ClusterMessage, frozen=True, kw_only=True):
    name: str
    node: str
    open_s: float


class WorkerFailed(ClusterMessage, frozen=True, kw_only=True):
    """The worker could not open its systems (e.g. a model file missing on its node)."""

    name: str
    node: str
    reason: str


class TripleDone(ClusterMessage, frozen=True, kw_only=True):
    """One (task, mode, arm) finished on ``node``.

    ``live``: the run-wide counters of that worker's system for ``key`` (cumulative),
    ``wall_clock_s`` being the time spent in it. ``run_s``: the worker's own time in
    ``run_task`` for this triple (what the driver subtracts to measure Ray's overhead).
    ``capsule``: the task's final capsule JSON (the driver writes it beside the results).
    """

    key: Key
    result: TaskResult
    live: RunInfo
    run_s: float
    node: str
    capsule: bytes = b""


class LogFile(ClusterMessage, frozen=True, kw_only=True):
    key: Key
    data: bytes


class WorkerClosed(ClusterMessage, frozen=True, kw_only=True):
    """The worker closed its systems; ``logs`` are its event logs (empty with a shared
    ``log_dir``)."""

    name: str
    logs: list[LogFile]


OpenReply = WorkerReady | WorkerFailed

_ENCODER = msgspec.msgpack.Encoder()
CONFIG = msgspec.msgpack.Decoder(WorkerConfig)
ITEM = msgspec.msgpack.Decoder(WorkItem)
OPEN_REPLY = msgspec.msgpack.Decoder(OpenReply)
TRIPLE = msgspec.msgpack.Decoder(TripleDone)
CLOSED = msgspec.msgpack.Decoder(WorkerClosed)


def encode(message: ClusterMessage) -> bytes:
    return _ENCODER.encode(message)
