"""The Prefetcher: brings in the next phase's model while the current one generates."""

from __future__ import annotations

from typing import Literal, assert_never

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.base import Events, Outbox, Pending
from swapos.backends.base import ModelBackend
from swapos.messages.base import new_id
from swapos.messages.commands import ModelUse, PrefetchDone, PrefetchModel, ScheduleUpdated
from swapos.messages.events import PrefetchFinished, PrefetchStarted
from swapos.messages.inboxes import PrefetcherInbox
from swapos.models.spec import ModelSpec

log = structlog.get_logger(__name__)

PrefetchPolicy = Literal["load", "warm", "off"]
"""``load``: speculative full load when the Evictor grants room, else a page-cache warm-up.
``warm``: page-cache warm-up only. ``off``: no prefetching."""


class PrefetcherStatistics(msgspec.Struct, frozen=True, kw_only=True):
    loads: int
    warms: int
    denied: int


def next_to_prefetch(uses: list[ModelUse]) -> str | None:
    """The model of the first upcoming use after the running one(s), if it differs."""
    ordered = sorted(uses, key=lambda u: u.order)
    current = {u.model for u in ordered if u.order == 0}
    for use in ordered:
        if use.order > 0 and use.model not in current:
            return use.model
    return None


class Prefetcher:
    """Owns only its plan: on each schedule update, prefetch the next model.

    A speculative load goes through the Loader (which asks the Evictor for room that does
    not hurt a sooner use); if it is denied, the model's file is warmed into the page cache
    instead so the later load reads from memory.
    """

    def __init__(
        self,
        *,
        inbox: MemoryObjectReceiveStream[PrefetcherInbox],
        outbox: Outbox,
        events: Events,
        backend: ModelBackend,
        specs: dict[str, ModelSpec],
        policy: PrefetchPolicy = "load",
    ) -> None:
        self._inbox = inbox
        self._outbox = outbox
        self._events = events
        self._backend = backend
        self._specs = specs
        self.policy = policy
        self._pending = Pending()
        self._busy: set[str] = set()
        self._tg: TaskGroup | None = None
        self._loads = self._warms = self._denied = 0

    def statistics(self) -> PrefetcherStatistics:
        return PrefetcherStatistics(loads=self._loads, warms=self._warms, denied=self._denied)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve schedule updates; on exit, running warm-ups are cancelled."""
        try:
            async with self._inbox, anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                async for msg in self._inbox:
                    await self._handle(msg)
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._outbox.aclose()

    async def _handle(self, msg: PrefetcherInbox) -> None:
        assert self._tg is not None
        match msg:
            case ScheduleUpdated(uses=uses):
                model = next_to_prefetch(uses) if self.policy != "off" else None
                if model is not None and model not in self._busy and model in self._specs:
                    self._busy.add(model)
                    self._tg.start_soon(self._prefetch, model)
            case PrefetchDone():
                self._pending.resolve(msg)
            case _:
                assert_never(msg)

    async def _prefetch(self, model: str) -> None:
        try:
            if self.policy == "load":
                t0 = self._events.t()
                await self._events.emit(PrefetchStarted(t=t0, model=model, kind="load"))
                reply = await self._pending.ask(
                    self._outbox,
                    "loader",
                    PrefetchModel(request_id=new_id("pf"), reply_to="prefetcher", model=model),
                )
                assert isinstance(reply, PrefetchDone)
                await self._events.emit(
                    PrefetchFinished(
                        t=self._events.t(),
                        model=model,
                        kind="load",
                        outcome=reply.outcome,
                        duration_s=self._events.t() - t0,
                    )
                )
                if reply.outcome == "loaded":
                    self._loads += 1
                if reply.outcome not in ("denied", "failed"):
                    return
                self._denied += reply.outcome == "denied"
            await self._warm_up(model)
        finally:
            self._busy.discard(model)

    async def _warm_up(self, model: str) -> None:
        t0 = self._events.t()
        await self._events.emit(PrefetchStarted(t=t0, model=model, kind="warm"))
        await self._backend.warm(self._specs[model])
        self._warms += 1
        await self._events.emit(
            PrefetchFinished(
                t=self._events.t(),
                model=model,
                kind="warm",
                outcome="warmed",
                duration_s=self._events.t() - t0,
            )
        )
