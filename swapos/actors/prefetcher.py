"""The Prefetcher: brings in the next phase's model while the current one generates."""

from __future__ import annotations

from typing import Literal, assert_never

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.base import Events, Outbox, Pending, serving
from swapos.backends.base import ModelBackend
from swapos.errors import SwapOSError
from swapos.messages.base import new_id
from swapos.messages.commands import (
    ModelUse,
    PhaseObserved,
    PrefetchDone,
    PrefetchModel,
    ScheduleUpdated,
)
from swapos.messages.events import PrefetchFinished, PrefetchStarted
from swapos.messages.inboxes import PrefetcherInbox
from swapos.models.spec import ModelSpec
from swapos.policies.prefetch import CostModel, Decision

log = structlog.get_logger(__name__)

PrefetchPolicy = Literal["auto", "load", "warm", "off"]
"""``auto``: full load or warm-up, whichever the learned costs say is cheaper (the default
in overlap mode). ``load``: always try a speculative full load (warm-up when the Evictor
has no room). ``warm``: page-cache warm-up only. ``off``: no prefetching."""

OVERLAP_SHARE = 0.25
"""A generation counts as overlapped when a speculative load covered this share of it."""


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


def _running(uses: list[ModelUse]) -> str | None:
    return next((u.model for u in uses if u.order == 0), None)


class Prefetcher:
    """Owns only its plan: on each schedule update, prefetch the next model.

    A speculative load goes through the Loader (which asks the Evictor for room that does
    not hurt a sooner use); if it is denied, the model's file is warmed into the page cache
    instead so the later load reads from memory. With the ``auto`` policy a
    :class:`~swapos.policies.prefetch.CostModel`, fed by :class:`PhaseObserved` reports,
    decides between the two.
    """

    def __init__(
        self,
        *,
        inbox: MemoryObjectReceiveStream[PrefetcherInbox],
        outbox: Outbox,
        events: Events,
        backend: ModelBackend,
        specs: dict[str, ModelSpec],
        policy: PrefetchPolicy = "auto",
    ) -> None:
        self._inbox = inbox
        self._outbox = outbox
        self._events = events
        self._backend = backend
        self._specs = specs
        self.policy = policy
        self.costs = CostModel()
        self._pending = Pending()
        self._busy: set[str] = set()
        self._loads_in_flight: dict[str, float] = {}
        self._load_windows: list[tuple[float, float]] = []
        self._warmed: set[str] = set()
        self._tg: TaskGroup | None = None
        self._loads = self._warms = self._denied = 0

    def statistics(self) -> PrefetcherStatistics:
        return PrefetcherStatistics(loads=self._loads, warms=self._warms, denied=self._denied)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve schedule updates; on exit, running warm-ups are cancelled."""
        async with serving(self._inbox, self._outbox) as self._tg:
            task_status.started()
            async for msg in self._inbox:
                await self._handle(msg)

    async def _handle(self, msg: PrefetcherInbox) -> None:
        assert self._tg is not None
        match msg:
            case ScheduleUpdated(uses=uses):
                model = next_to_prefetch(uses) if self.policy != "off" else None
                if model is not None and model not in self._busy and model in self._specs:
                    self._busy.add(model)
                    self._tg.start_soon(self._prefetch, model, self._decide(model, uses))
            case PrefetchDone():
                self._pending.resolve(msg)
            case PhaseObserved():
                self._observe(msg)
            case _:
                assert_never(msg)

    def _decide(self, model: str, uses: list[ModelUse]) -> Decision:
        if self.policy == "auto":
            return self.costs.decide(model, _running(uses))
        if self.policy == "warm":
            return Decision(kind="warm", reason="policy: warm only")
        return Decision(kind="load", reason="policy: load")

    def _observe(self, obs: PhaseObserved) -> None:
        window = obs.ended_t - obs.started_t
        covered = sum(
            max(0.0, min(end, obs.ended_t) - max(start, obs.started_t))
            for start, end in self._load_windows
        ) + sum(
            max(0.0, obs.ended_t - max(start, obs.started_t))
            for start in self._loads_in_flight.values()
        )
        overlapped = window > 0 and covered >= OVERLAP_SHARE * window
        self.costs.observe_generation(obs.model, obs.tokens, obs.gen_s, overlapped=overlapped)
        if obs.load_s > 0 and obs.load_hidden_s == 0 and obs.model in self._warmed:
            self.costs.observe_paid_load(obs.model, obs.load_s)
        self._load_windows = [w for w in self._load_windows if w[1] > obs.started_t]

    async def _prefetch(self, model: str, decision: Decision) -> None:
        try:
            if await self._speculative_load(model, decision):
                return
            await self._warm_up(model, decision)
        finally:
            self._busy.discard(model)

    async def _speculative_load(self, model: str, decision: Decision) -> bool:
        """Ask the Loader for a speculative load (or, for a warm-up decision, only whether
        the model is already there). True when nothing more is needed."""
        t0 = self._events.t()
        warm_only = decision.kind == "warm"
        if not warm_only:
            await self._events.emit(
                PrefetchStarted(t=t0, model=model, kind="load", reason=decision.reason)
            )
        self._loads_in_flight[model] = t0
        try:
            reply = await self._pending.ask(
                self._outbox,
                "loader",
                PrefetchModel(
                    request_id=new_id("pf"),
                    reply_to="prefetcher",
                    model=model,
                    warm_only=warm_only,
                ),
            )
        finally:
            self._loads_in_flight.pop(model, None)
        assert isinstance(reply, PrefetchDone)
        t1 = self._events.t()
        if warm_only:
            return reply.outcome in ("resident", "joined")
        await self._events.emit(
            PrefetchFinished(
                t=t1, model=model, kind="load", outcome=reply.outcome, duration_s=t1 - t0
            )
        )
        if reply.outcome == "loaded":
            self._loads += 1
            self._load_windows.append((t0, t1))
            self.costs.observe_speculative_load(model, t1 - t0)
        self._denied += reply.outcome == "denied"
        return reply.outcome not in ("denied", "failed")

    async def _warm_up(self, model: str, decision: Decision) -> None:
        t0 = self._events.t()
        await self._events.emit(
            PrefetchStarted(t=t0, model=model, kind="warm", reason=decision.reason)
        )
        outcome = "warmed"
        try:
            await self._backend.warm(self._specs[model])
            self._warms += 1
            self._warmed.add(model)
        except SwapOSError as exc:  # a bad file fails its load later, with a reason
            outcome = f"failed: {exc}"
        await self._events.emit(
            PrefetchFinished(
                t=self._events.t(),
                model=model,
                kind="warm",
                outcome=outcome,
                duration_s=self._events.t() - t0,
            )
        )
