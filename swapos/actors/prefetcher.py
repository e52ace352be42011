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
    PrefetchOutcome,
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
    read_s: dict[str, float] = {}
    """The learned file-read part of each model's loads (seconds)."""
    upload_s: dict[str, dict[str, float]] = {}
    """The learned upload part, per model and device."""
    load_estimate_s: dict[str, float] = {}
    """The expected seconds of each model's next load (read + upload to its device)."""


def upcoming_models(uses: list[ModelUse]) -> list[str]:
    """The models of the upcoming uses, soonest first, each once, without the running ones."""
    ordered = sorted(uses, key=lambda u: u.order)
    current = {u.model for u in ordered if u.order == 0}
    return list(dict.fromkeys(u.model for u in ordered if u.order > 0 and u.model not in current))


def _needs_warm_up(outcome: PrefetchOutcome, decision: Decision) -> bool:
    """Whether a page-cache warm-up should follow the Loader's ``outcome``: after a denied
    or failed load, or for a warm-up decision when the model is neither there nor coming."""
    if decision.kind == "warm":
        return outcome not in ("resident", "joined")
    return outcome in ("denied", "failed")


def _running(uses: list[ModelUse]) -> str | None:
    return next((u.model for u in uses if u.order == 0), None)


class Prefetcher:
    """Owns only its plan: on each schedule update, prefetch the next model.

    The next model is the first upcoming one that is not already resident: when the Loader
    answers that a model is there, the one after it is tried (so while a task grades, the
    announced next task's model comes in behind an already prefetched critic). A speculative
    load goes through the Loader (which asks the Evictor for room that does not hurt a
    sooner use); if it is denied, the model's file is warmed into the page cache instead so
    the later load reads from memory. With the ``auto`` policy a
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
        uploads: dict[str, dict[str, float]] = {}
        for (model, device), seconds in self.costs.upload_s.items():
            uploads.setdefault(model, {})[device] = seconds
        return PrefetcherStatistics(
            loads=self._loads,
            warms=self._warms,
            denied=self._denied,
            read_s=dict(self.costs.read_s),
            upload_s=uploads,
            load_estimate_s={m: self.costs.load_estimate_s(m) or 0.0 for m in self.costs.read_s},
        )

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
                models = upcoming_models(uses) if self.policy != "off" else []
                models = [m for m in models if m in self._specs]
                if models and models[0] not in self._busy:
                    self._busy.add(models[0])
                    self._tg.start_soon(self._prefetch, models, uses)
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

    async def _prefetch(self, models: list[str], uses: list[ModelUse]) -> None:
        """Prefetch ``models[0]`` (already marked busy); while the Loader says a model is
        resident, go on to the next one."""
        for i, model in enumerate(models):
            if i > 0:
                if model in self._busy:
                    return
                self._busy.add(model)
            try:
                decision = self._decide(model, uses)
                outcome = await self._speculative_load(model, decision)
                if outcome != "resident":
                    if _needs_warm_up(outcome, decision):
                        await self._warm_up(model, decision)
                    return
            finally:
                self._busy.discard(model)

    async def _speculative_load(self, model: str, decision: Decision) -> PrefetchOutcome:
        """Ask the Loader for a speculative load (or, for a warm-up decision, only whether
        the model is already there); the Loader's outcome."""
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
            return reply.outcome
        await self._events.emit(
            PrefetchFinished(
                t=t1, model=model, kind="load", outcome=reply.outcome, duration_s=t1 - t0
            )
        )
        if reply.outcome == "loaded":
            self._loads += 1
            self._load_windows.append((t0, t1))
            self.costs.observe_speculative_load(model, t1 - t0)
            self.costs.observe_load_parts(model, reply.read_s, reply.upload_s, reply.device)
        self._denied += reply.outcome == "denied"
        return reply.outcome

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
