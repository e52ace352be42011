"""The Recorder: writes every event to the run's JSONL log and keeps the run's records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO

import anyio
import msgspec
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.messages.events import AnyEvent, TaskFinished
from swapos.records.aggregate import Aggregator, run_key
from swapos.records.log_files import keep_earlier_run
from swapos.records.schema import RunSummary, TaskResult

log = structlog.get_logger(__name__)

BATCH_MAX = 1024
"""Most events written between two flushes."""


class RecorderStatistics(msgspec.Struct, frozen=True, kw_only=True):
    events: int
    bytes_written: int
    flushes: int


class Recorder:
    """Writes one JSON line per event, flushing whenever its inbox runs empty.

    A log holds one run: an earlier run's log found at ``path`` is renamed first
    (:func:`~swapos.records.log_files.keep_earlier_run`). Events are written in batches
    (everything waiting in the inbox, up to :data:`BATCH_MAX`) and flushed to the OS after
    each batch, so a crash loses nothing that was handed to the Recorder before its last
    flush. The same events feed an
    :class:`~swapos.records.aggregate.Aggregator`, the single source of every reported
    number.
    """

    def __init__(
        self,
        *,
        inbox: MemoryObjectReceiveStream[AnyEvent],
        path: Path | None,
        on_event: Callable[[AnyEvent], None] | None = None,
    ) -> None:
        self._inbox = inbox
        self.path = path
        self._on_event = on_event
        self._watchers: tuple[Callable[[AnyEvent], None], ...] = ()
        self.aggregator = Aggregator()
        self._encoder = msgspec.json.Encoder()
        self._file: IO[bytes] | None = None
        self.kept: Path | None = None
        """Where an earlier run's log found at ``path`` was moved when this one started."""
        self._task_done: dict[str, anyio.Event] = {}  # by run id
        self._finished: set[str] = set()  # run ids
        self._events = self._bytes = self._flushes = 0

    def statistics(self) -> RecorderStatistics:
        return RecorderStatistics(
            events=self._events, bytes_written=self._bytes, flushes=self._flushes
        )

    def summary(self) -> RunSummary:
        return self.aggregator.summary()

    def watch(self, watcher: Callable[[AnyEvent], None]) -> Callable[[], None]:
        """Call ``watcher`` on the event loop with every event from now on, after it is
        written (as ``on_event`` is called); returns the function that stops it.

        A watcher must be quick and must not raise: it runs inside the Recorder's loop.
        """
        self._watchers = (*self._watchers, watcher)

        def stop() -> None:
            self._watchers = tuple(w for w in self._watchers if w is not watcher)

        return stop

    async def task_result(self, run_id: str) -> TaskResult:
        """Wait until the run ``run_id`` of a task has finished in the log, then return its
        record. (Keyed by run, not by task id: runs of one task id may overlap.)"""
        if run_id not in self._finished:
            await self._task_done.setdefault(run_id, anyio.Event()).wait()
        return self.aggregator.tasks[run_id]

    def _open(self) -> None:
        """Start the log at ``path``; an earlier run's log found there is kept under another
        name (:mod:`swapos.records.log_files`: one run per log)."""
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.kept = keep_earlier_run(self.path)
            if self.kept is not None:
                log.warning("recorder.earlier_run_kept", path=str(self.path), kept=str(self.kept))
            self._file = self.path.open("ab")

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Record until every sender has closed its stream; the file is flushed and closed
        on any exit (shielded)."""
        self._open()
        try:
            async with self._inbox:
                task_status.started()
                while True:
                    try:
                        first = await self._inbox.receive()
                    except anyio.EndOfStream:
                        break
                    batch = [first]
                    while len(batch) < BATCH_MAX:
                        try:
                            batch.append(self._inbox.receive_nowait())
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                    self._write(batch)
        finally:
            if self._file is not None:
                self._file.flush()
                self._file.close()

    def _write(self, batch: list[AnyEvent]) -> None:
        buf = bytearray()
        for ev in batch:
            self._encoder.encode_into(ev, buf, len(buf))
            buf.extend(b"\n")
        if self._file is not None:
            self._file.write(buf)
            self._file.flush()
            self._flushes += 1
        self._bytes += len(buf)
        self._events += len(batch)
        for ev in batch:
            self.aggregator.feed(ev)
            if self._on_event is not None:
                self._on_event(ev)
            for watcher in self._watchers:
                watcher(ev)
            if isinstance(ev, TaskFinished):
                rid = run_key(ev)
                self._finished.add(rid)
                done = self._task_done.pop(rid, None)
                if done is not None:
                    done.set()
