"""What the live page shows besides the timeline: each model's state, queue and bytes, the
budget and what shares it, and the learned transitions. Read from frozen snapshots only
(the Loader's residency, the actors' statistics, the scheduler's queues): the page never
holds the server's live state.
"""

from __future__ import annotations

import msgspec

from swapos.policies.keepalive import FOREVER
from swapos.policies.serving import GLOBAL_KEY
from swapos.records.timeline import Bar
from swapos.serve.state import Server
from swapos.serve.ui_events import WINDOW_S, EventHub


class ModelRow(msgspec.Struct, frozen=True, kw_only=True):
    """One model as the page shows it.

    Attributes:
        name: the profile's name for it.
        state: ``absent``, ``loading``, ``ready`` or ``evicting`` (the Loader's snapshot).
        leases: leases held on it now (a leased model is never evicted).
        bytes: its measured footprint once loaded, else its estimate while it loads.
        n_ctx: its context length.
        waiting, running, oldest_wait_s, held: its queue in the server's scheduler.
        slots: its requests admitted at once.
        loading_since, expect_s: a load in flight: when it started (run time) and how long
            the model's previous load took (0: unknown).
        load_progress: how far its load has gone (0 to 1), as the backend reports it.
        pinned: never evicted to make room (the profile's ``pin``).
        ttl_s: the profile's ``ttl`` in seconds (None: none).
        expires_in_s: seconds until a keep-alive or ttl unloads it once idle (None: never).
        aliases: other names it answers to.
    """

    name: str
    state: str
    leases: int
    bytes: int
    n_ctx: int
    waiting: int = 0
    running: int = 0
    oldest_wait_s: float = 0.0
    held: bool = False
    slots: int = 1
    loading_since: float | None = None
    expect_s: float = 0.0
    load_progress: float | None = None
    pinned: bool = False
    ttl_s: float | None = None
    expires_in_s: float | None = None
    aliases: list[str] = msgspec.field(default_factory=list)


class Memory(msgspec.Struct, frozen=True, kw_only=True):
    """The budget and what takes it: the models (``used_bytes``), the process's fixed
    overhead and the KV cache's RAM tier (``kv_shared``: it shares the budget)."""

    budget_bytes: int
    used_bytes: int
    overhead_bytes: int
    kv_bytes: int
    kv_budget_bytes: int
    kv_shared: bool
    unlimited: bool


class Transition(msgspec.Struct, frozen=True, kw_only=True):
    """How often a request for ``to`` followed one for ``src`` (every client together)."""

    src: str
    to: str
    count: int


class LiveState(msgspec.Struct, frozen=True, kw_only=True):
    """One ``state`` message of the page's stream (``bars`` only in a full one)."""

    now: float
    mode: str
    window_s: float
    models: list[ModelRow]
    memory: Memory
    transitions: list[Transition]
    predicted: dict[str, str]
    bars: list[Bar] | None = None


def live_state(server: Server, hub: EventHub, *, full: bool) -> LiveState:
    """The page's view now; ``full`` adds the timeline's bars (the window)."""
    system = server.system
    now, clock_now = system.run_time(), system.clock.now()
    configs = system.profile.models
    residency = {m.model: m for m in system.residency().models}
    queues = {q.model: q for q in server.scheduler.snapshot()}
    loading = {b.lane: b for b in hub.timeline.bars.values() if b.kind == "loading"}
    rows = []
    for name, spec in sorted(system.specs.items()):
        st, q, load = residency.get(name), queues.get(name), loading.get(name)
        state = st.state if st is not None else "absent"
        measured = st.footprint_bytes if st is not None else 0
        expires = server.expiry.keep_alive.expires_at(name)
        cfg = configs.get(name)
        rows.append(
            ModelRow(
                name=name,
                state=state,
                leases=st.leases if st is not None else 0,
                bytes=measured or (hub.timeline.estimate_bytes.get(name, 0) if load else 0),
                n_ctx=spec.n_ctx,
                waiting=q.waiting if q else 0,
                running=q.running if q else 0,
                oldest_wait_s=q.oldest_wait_s if q else 0.0,
                held=q.held if q else False,
                slots=q.slots if q else max(spec.slots, 1),
                loading_since=load.start if load is not None else None,
                expect_s=load.expect_s if load is not None else 0.0,
                load_progress=st.load_progress if st is not None else None,
                pinned=cfg is not None and cfg.pin,
                ttl_s=server.expiry.ttls.get(name),
                expires_in_s=expires - clock_now
                if expires < FOREVER and state == "ready"
                else None,
                aliases=server.names.aliases_of(name),
            )
        )
    return LiveState(
        now=now,
        mode=system.mode,
        window_s=WINDOW_S,
        models=rows,
        memory=memory(server),
        transitions=transitions(server),
        predicted=predicted(server),
        bars=hub.bars(now) if full else None,
    )


def memory(server: Server) -> Memory:
    stats = server.system.statistics()
    loader, kv = stats["loader"], stats["kvcache"]
    return Memory(
        budget_bytes=loader.budget_bytes,
        used_bytes=loader.used_bytes,
        overhead_bytes=loader.overhead_bytes,
        kv_bytes=kv.bytes,
        kv_budget_bytes=kv.budget_bytes,
        kv_shared=loader.kv_ram_bytes is not None,
        unlimited=loader.budget_bytes >= 2**60,
    )


def transitions(server: Server) -> list[Transition]:
    """Every client's transitions together (never a client's own: its key may be the
    server's bearer key)."""
    learned = server.next_models.transitions
    return [
        Transition(src=src, to=to, count=n)
        for src in sorted(server.system.specs)
        for to, n in sorted(learned.successors(GLOBAL_KEY, src).items())
    ]


def predicted(server: Server) -> dict[str, str]:
    """The model predicted to follow each model (every client's habit), where one is."""
    out = {}
    for name in sorted(server.system.specs):
        nxt = server.next_models.predict(None, name)
        if nxt is not None:
            out[name] = nxt
    return out
