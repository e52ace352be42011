"""The model table: every model's row, and the loads and evictions that move it along its
lifecycle (``absent -> waiting -> loading -> ready -> evicting -> absent``; the declared
transitions are in swapos/data/lifecycle.py, and the ledger checks each move).

One owner: the Loader holds one :class:`ModelTable`; nothing else moves a model. A load is
a :class:`~swapos.actors.loads.Load` and an eviction an
:class:`~swapos.actors.loads.Eviction`, each created once when it starts and finished once
when it ends; whoever waits for a model joins the one under way (:meth:`under_way`).

Loads run as tasks of the Loader's task group, so a requester that is cancelled does not
cancel a load others have joined. A load asks :class:`~swapos.actors.admission.Admission`
for room, claims the plan in the ledger (from then on no lease is granted on its victims),
cancels the prefetches the plan names, closes its victims (shielded), lets the KV tier
yield what is left (:meth:`ModelTable.fit_kv`), then loads in the backend.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup

from swapos.actors.accounting import MemoryAccount
from swapos.actors.admission import Admission, Admitted, Refused
from swapos.actors.base import Events, Outbox, Pending
from swapos.actors.cold import PageCache
from swapos.actors.loads import Eviction, Load
from swapos.backends.base import LoadedModel, ModelBackend
from swapos.data.lifecycle import Lifecycle
from swapos.data.residency import ModelState, ResidencySnapshot
from swapos.errors import SwapOSError, SystemClosedError
from swapos.messages.base import new_id
from swapos.messages.commands import ResizeKVRam
from swapos.messages.events import (
    ModelEvicted,
    ModelEvictStarted,
    ModelLoadCancelled,
    ModelLoaded,
    ModelLoadFailed,
    ModelLoadStarted,
)
from swapos.models.spec import ModelSpec

log = structlog.get_logger(__name__)


@dataclass
class Row:
    """One model's row: its spec, the model once loaded, and the work under way on it."""

    spec: ModelSpec
    model: LoadedModel | None = None
    load: Load | None = None
    """The load under way, or the one that made the model ready (None once evicted)."""
    eviction: Eviction | None = None
    """The eviction under way (None when none is)."""


class ModelTable:
    """Every model's row and lifecycle; counts loads, evictions and failures."""

    def __init__(
        self,
        *,
        specs: dict[str, ModelSpec],
        backend: ModelBackend,
        events: Events,
        outbox: Outbox,
        pending: Pending,
        memory: MemoryAccount,
        admission: Admission,
        page_cache: PageCache,
    ) -> None:
        self._rows = {name: Row(spec=spec) for name, spec in specs.items()}
        self._specs = specs  # each model's start: a load without a need loads with it
        self._backend = backend
        self._events = events
        self._outbox = outbox
        self._pending = pending
        self._memory = memory
        self._ledger = memory.ledger
        self._admission = admission
        self._page_cache = page_cache
        self.loads = self.evictions = self.failures = 0

    # --- reading --------------------------------------------------------------------------

    def names(self) -> list[str]:
        return list(self._rows)

    def row(self, name: str) -> Row | None:
        return self._rows.get(name)

    def state(self, name: str) -> Lifecycle:
        return self._ledger.status(name)

    def context(self, name: str) -> int | None:
        """The context ``name`` is loaded with (None while it is not ready)."""
        row = self._rows[name]
        return row.spec.n_ctx if self.state(name) is Lifecycle.READY else None

    def too_big_with(self, name: str, n_ctx: int) -> str:
        """Why ``name`` loaded with a context of ``n_ctx`` tokens could never fit its budget
        (its footprint estimate, the context's KV cache included), or ""."""
        spec = msgspec.structs.replace(self._specs[name], n_ctx=n_ctx)
        host = self._backend.estimate_footprint(spec)
        return self._memory.too_big(name, host, self._backend.estimate_device_footprint(spec))

    def under_way(self, name: str) -> Load | Eviction:
        """What a waiter for ``name`` (not absent, not ready) joins: its eviction, or its
        load (also the load of a prefetch an urgent plan is cancelling)."""
        row = self._rows[name]
        if self.state(name) is Lifecycle.EVICTING and row.eviction is not None:
            return row.eviction
        assert row.load is not None, f"{name} is {self.state(name).value} with no load"
        return row.load

    def residency(self) -> ResidencySnapshot:
        """Every model's state, leases and measured footprints, as frozen data."""
        return ResidencySnapshot(
            models=tuple(
                ModelState(
                    model=name,
                    state=self.state(name).served,
                    leases=self._ledger.leases(name),
                    footprint_bytes=row.model.footprint_bytes if row.model else 0,
                    device_footprint_bytes=_device_bytes(row.model),
                    load_progress=self._progress(name, row),
                    n_ctx=row.spec.n_ctx if row.load is not None else 0,
                )
                for name, row in self._rows.items()
            )
        )

    def _progress(self, name: str, row: Row) -> float | None:
        """How far ``name``'s load has gone (0 to 1) while it loads; None otherwise (also
        while it waits for room)."""
        if self.state(name) is not Lifecycle.LOADING or row.load is None:
            return None
        return row.load.progress

    # --- loading --------------------------------------------------------------------------

    def start_load(self, tg: TaskGroup, name: str, *, urgent: bool, n_ctx: int = 0) -> Load:
        """Start loading absent ``name`` in ``tg`` with a context of ``n_ctx`` tokens (0: its
        start); the returned load is its one handle."""
        row = self._rows[name]
        start = self._specs[name]
        row.spec = msgspec.structs.replace(start, n_ctx=n_ctx) if n_ctx else start
        self._ledger.want(name, speculative=not urgent, now=self._events.t())
        load = row.load = Load(speculative=not urgent)
        tg.start_soon(self._load, name, row, load)
        return load

    async def _load(self, name: str, row: Row, load: Load) -> None:
        """Make room, evict victims, load. Always ends with ``load`` finished."""
        estimate = device_estimate = 0
        try:
            with load.scope:
                estimate = self._backend.estimate_footprint(row.spec)
                device_estimate = self._backend.estimate_device_footprint(row.spec)
                await self._events.emit(
                    ModelLoadStarted(
                        t=self._events.t(),
                        model=name,
                        speculative=load.started_speculative,
                        estimate_bytes=estimate,
                        device_estimate_bytes=device_estimate,
                        n_ctx=row.spec.n_ctx,
                    )
                )
                t_room = self._events.t()
                admitted = await self._admission.admit(name, estimate, device_estimate)
                if isinstance(admitted, Refused):
                    await self._refused(name, load, admitted)
                    return
                await self._claim(name, admitted, (estimate, device_estimate))
                for other in admitted.plan.cancel:
                    await self.cancel_load(other)
                for victim in admitted.plan.victims:
                    await self.evict(victim, reason=f"room for {name}")
                await self.fit_kv()  # victims are gone: the KV tier yields what is left
                load.room = (t_room, self._events.t())
                t_load = self._events.t()
                model = await self._backend.load(row.spec, progress=load.report)
                if self.state(name) is Lifecycle.EVICTING:  # cancelled by an urgent plan
                    with anyio.CancelScope(shield=True):  # just as the load finished
                        await model.close()
                    return
                self._loaded(name, row, load, model, t_load=t_load)
                await self._events.emit(
                    ModelLoaded(
                        t=self._events.t(),
                        model=name,
                        load_s=load.times[1] - t_load,
                        speculative=load.started_speculative,  # started by a prefetch
                        estimate_bytes=estimate,
                        measured_bytes=model.footprint_bytes,
                        device_estimate_bytes=device_estimate,
                        measured_device_bytes=_device_bytes(model),
                        upload_s=model.offload.upload_s if model.offload is not None else 0.0,
                        device=model.offload.device if model.offload is not None else "",
                        n_ctx=row.spec.n_ctx,
                    )
                )
        except SwapOSError as exc:
            load.decide("failed", str(exc))
            self.failures += 1
            log.warning("model_load.failed", model=name, reason=str(exc))
            with anyio.CancelScope(shield=True):
                await self._events.emit(
                    ModelLoadFailed(t=self._events.t(), model=name, reason=str(exc))
                )
        finally:
            if self.state(name) is not Lifecycle.READY:
                with anyio.CancelScope(shield=True):
                    await self._not_loaded(name, load)
            load.finish()

    async def _claim(self, name: str, admitted: Admitted, claim: tuple[int, int]) -> None:
        """Record ``admitted``'s plan and the ``(host, device)`` bytes it claims in the
        ledger (from now on no lease is granted on its victims), and log it."""
        plan = admitted.plan
        self._ledger.reserve(name, plan, *claim)
        for victim in plan.victims:
            self._rows[victim].eviction = Eviction()
        await self._admission.claimed(name, admitted, claim)

    async def _refused(self, name: str, load: Load, refused: Refused) -> None:
        """An urgent load that can never fit fails; a prefetch without room is denied (its
        end is logged as cancelled)."""
        if refused.urgent:
            load.decide("failed", refused.reason)
            self.failures += 1
            await self._events.emit(
                ModelLoadFailed(t=self._events.t(), model=name, reason=refused.reason)
            )
        else:
            load.decide("denied", refused.reason)

    def _loaded(
        self, name: str, row: Row, load: Load, model: LoadedModel, *, t_load: float
    ) -> None:
        """Book the model ``_load`` just loaded as ready."""
        row.model = model
        load.times = (t_load, self._events.t())
        entry = self._ledger.entry(name)
        still_speculative = entry is not None and entry.speculative  # nobody joined it
        self._ledger.loaded(name, model.footprint_bytes, _device_bytes(model))
        self.room_may_have_changed()  # the measured footprint may be smaller
        load.decide("loaded")
        self.loads += 1
        if still_speculative:
            load.hidden_credit_s = load.times[1] - load.times[0]

    async def _not_loaded(self, name: str, load: Load) -> None:
        """A load that did not end ready: forget its claim; a cancelled or refused one logs
        its end (every started load does). Call it shielded."""
        self._ledger.forget(name)
        self.room_may_have_changed()
        if load.outcome in (None, "cancelled", "denied"):
            reason = "cancelled" if load.outcome != "denied" else load.failure
            await self._events.emit(
                ModelLoadCancelled(t=self._events.t(), model=name, reason=reason)
            )

    async def cancel_load(self, name: str) -> None:
        """Cancel ``name``'s load (a prefetch an urgent plan chose) and wait for its end."""
        load = self._rows[name].load
        assert load is not None
        load.scope.cancel()
        await load.wait()

    # --- evicting -------------------------------------------------------------------------

    async def evict(self, name: str, *, reason: str) -> None:
        """Close ready (or victim) ``name``, shielded: a close is never cut half-way."""
        with anyio.CancelScope(shield=True):
            await self._close(name, reason=reason)

    async def close_all(self) -> None:
        """Close every loaded model (shutdown; call it shielded)."""
        for name, row in self._rows.items():
            if row.model is not None:
                await self._close(name, reason="shutdown")

    async def _close(self, name: str, *, reason: str) -> None:
        row = self._rows[name]
        if self.state(name) is Lifecycle.READY:  # a victim is evicting already
            self._ledger.evicting(name)
            row.eviction = Eviction()
        eviction = row.eviction
        assert eviction is not None, f"{name} is closing with no eviction"
        model = row.model
        t0 = self._events.t()
        await self._events.emit(ModelEvictStarted(t=t0, model=name, reason=reason))
        if model is not None:
            await model.close()
            await self._page_cache.evicted(row.spec)
        row.model = row.load = row.eviction = None
        self.evictions += 1
        self._ledger.forget(name)
        self.room_may_have_changed()
        await self._events.emit(
            ModelEvicted(
                t=self._events.t(), model=name, evict_s=self._events.t() - t0, reason=reason
            )
        )
        eviction.finish()

    # --- room and the KV tier -------------------------------------------------------------

    def room_may_have_changed(self) -> None:
        """Wake the urgent loads waiting for room (they ask the Evictor again), and give
        the KV tier what the models no longer hold (no reply awaited: the models' claims
        already hold; a resize that finds the KV cache's inbox full is sent next time)."""
        self._admission.room_changed()
        share = self._memory.kv_resize_due()
        if share is not None:
            resize = ResizeKVRam(request_id=new_id("kv"), reply_to="loader", budget_bytes=share)
            if self._outbox.send_nowait("kvcache", resize):
                self._memory.kv_sending(share)

    async def fit_kv(self) -> None:
        """Resize the KV RAM tier to its share (a no-op without one) and wait until it fits
        (a resize sent without waiting may still be queued): a claimed load starts only
        then. A KV cache that has shut down holds nothing to wait for."""
        share = self._memory.kv_share()
        if share is None:
            return
        self._memory.kv_sending(share)
        resize = ResizeKVRam(request_id=new_id("kv"), reply_to="loader", budget_bytes=share)
        with contextlib.suppress(SystemClosedError):
            await self._pending.ask(self._outbox, "kvcache", resize)


def _device_bytes(model: LoadedModel | None) -> int:
    offload = model.offload if model is not None else None
    return offload.device_bytes if offload is not None else 0
