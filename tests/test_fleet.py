"""The fleet's parts in one process, on the fake backend (asyncio and trio): the front,
the replicas behind it, the shared state. Ray's router is stood in for by a forwarder that
sends a request to a replica holding its id (tests/test_fleet_ray.py runs the real one)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing, asynccontextmanager
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from serve_fakes import wait_until

from swapos.cluster import fleet_replica
from swapos.cluster.fleet_front import FleetUnavailable, Front, ReplicaLost
from swapos.cluster.fleet_protocol import (
    PART,
    VIEW,
    FleetConfig,
    FleetView,
    ForwardedRequest,
    Observation,
    ReplicaReport,
    ReplicaSeen,
    ResponseBody,
    ResponsePart,
    ResponseStart,
    encode,
)
from swapos.cluster.fleet_replica import FleetReplica
from swapos.cluster.fleet_state import FleetState
from swapos.policies import fleet as fleet_policy
from swapos.policies.fleet import session_route
from swapos.testing import FakeClock
from tests.fleet_fakes import BUDGET, FakeReplicaFactory, profile, send

pytestmark = pytest.mark.anyio
BASE = "http://fleet.test"


class LocalState:
    """A :class:`FleetState` called in process (it takes and gives bytes, as over Ray)."""

    def __init__(self, state: FleetState | None = None) -> None:
        self.state = state or FleetState()

    async def observe(self, batch: bytes) -> None:
        await self.state.observe(batch)

    async def transitions(self) -> bytes:
        return await self.state.transitions()

    async def report(self, data: bytes) -> None:
        await self.state.report(data)

    async def view(self) -> FleetView:
        return VIEW.decode(await self.state.view())


class ToHolder:
    """Stands in for Ray's router: a replica that holds the id, else the next in turn."""

    def __init__(self, replicas: Sequence[FleetReplica]) -> None:
        self.replicas = list(replicas)
        self.sent: list[tuple[str | None, str]] = []
        self._turn = 0

    async def stream(
        self, request: ForwardedRequest, route: str | None
    ) -> AsyncIterator[ResponsePart]:
        holders = [r for r in self.replicas if route is not None and route in r.held()]
        if holders:
            replica = holders[0]
        else:
            replica = self.replicas[self._turn % len(self.replicas)]
            self._turn += 1
        self.sent.append((route, replica.name))
        async with aclosing(replica.handle(encode(request))) as parts:
            async for data in parts:
                yield PART.decode(data)


@asynccontextmanager
async def fleet(
    n: int = 1, *, state: LocalState | None = None, **config: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, Front, list[FleetReplica], LocalState]]:
    """``n`` replicas on the fake backend behind a front; an httpx client of the front."""
    state = state or LocalState()
    cfg = FleetConfig(profile=profile(), **config)
    clock = FakeClock()  # one for every replica: two autojumps would wait on each other
    factory = FakeReplicaFactory(clock=clock)
    replicas = [
        FleetReplica(cfg, f"r{i}", "here", BUDGET, state, lambda _: None, factory) for i in range(n)
    ]
    front = Front(cfg, ToHolder(replicas), state)
    async with clock.autojump(), anyio.create_task_group() as tg:
        try:
            for r in replicas:
                tg.start_soon(r.serve)
                await r.ready.wait()
            transport = httpx.ASGITransport(app=front.app())
            async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
                yield client, front, replicas, state
        finally:
            for r in replicas:
                r.stop()


async def test_the_front_answers_through_a_replica_as_swapos_serve_does() -> None:
    with anyio.fail_after(30):
        async with fleet() as (client, _, (replica,), _):
            whole = await send(client, "alias-m0")
            assert whole.status_code == 200
            assert whole.json()["choices"][0]["message"]["content"] == "this is m0 speaking, hello"
            assert whole.json()["model"] == "m0"
            body = {**_chat("m1"), "stream": True}
            streamed = await client.post("/v1/chat/completions", json=body)
            assert streamed.status_code == 200
            assert streamed.text.rstrip().endswith("data: [DONE]")
            listed = (await client.get("/v1/models")).json()["data"]
            assert [m["id"] for m in listed][:2] == ["m0", "alias-m0"]
            missing = await send(client, "nope")
            assert missing.status_code == 404 and "model_not_found" in missing.text
            await wait_until(lambda: {"m0", "m1"} <= replica.held())
            shown = (await client.get("/fleet")).json()
            (seen,) = shown["replicas"]
            assert seen["report"]["replica"] == "r0" and seen["live"]
            assert shown["front"]["requests"] == 4


def _chat(model: str) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}]}


class Canned:
    """A forwarder that answers 200 at once, or loses its replica as told."""

    def __init__(self, lose: Callable[[int], int | None] = lambda attempt: None) -> None:
        self.routes: list[str | None] = []
        self._lose = lose

    async def stream(
        self, request: ForwardedRequest, route: str | None
    ) -> AsyncIterator[ResponsePart]:
        attempt = len(self.routes)
        self.routes.append(route)
        after = self._lose(attempt)  # parts sent before the replica dies (None: never)
        parts: list[ResponsePart] = [
            ResponseStart(status=200, headers=[(b"content-type", b"text/plain")]),
            ResponseBody(body=b"one ", more=True),
            ResponseBody(body=b"two", more=False),
        ]
        for i, part in enumerate(parts):
            if after is not None and i >= after:
                raise ReplicaLost("ActorDiedError")
            yield part


def _front(forwarder: Any, state: FleetView | None = None, **config: Any) -> httpx.AsyncClient:
    class View:
        async def view(self) -> FleetView:
            return state or FleetView()

    front = Front(FleetConfig(profile=profile(), **config), forwarder, View())
    transport = httpx.ASGITransport(app=front.app())
    client = httpx.AsyncClient(transport=transport, base_url=BASE)
    client.front = front  # type: ignore[attr-defined]
    return client


def _held(*routes: str, live: bool = True) -> FleetView:
    report = ReplicaReport(replica="r0", routes=list(routes))
    return FleetView(replicas=[ReplicaSeen(report=report, age_s=0.0, live=live)])


async def test_the_front_routes_by_the_model_the_body_names() -> None:
    canned = Canned()
    held = _held(session_route("m1", "s1"))
    with anyio.fail_after(10):
        async with _front(canned, held) as client:
            await send(client, "alias-m1")
            await client.post("/api/chat", json={"name": "m2:latest", "messages": []})
            await client.get("/health")
            await client.post("/v1/chat/completions", content=b"{not json")
            await send(client, "unknown")
            await send(client, "m1", session="s1")
            await send(client, "m1", session="s2")
            await send(client, "m3", session="s1")
    assert canned.routes == [
        "m1", "m2", None, None, None, session_route("m1", "s1"), "m1", "m3",
    ]  # fmt: skip


async def test_a_dead_replicas_session_and_plain_routing_go_by_model_or_nothing() -> None:
    canned = Canned()
    with anyio.fail_after(10):
        async with _front(canned, _held(session_route("m1", "s1"), live=False)) as client:
            await send(client, "m1", session="s1")
        async with _front(canned, routing="none") as client:
            await send(client, "m1", session="s1")
    assert canned.routes == ["m1", None]


async def test_a_request_whose_replica_dies_before_answering_is_sent_again() -> None:
    canned = Canned(lose=lambda attempt: 1 if attempt < 2 else None)  # its start only
    with anyio.fail_after(10):
        async with _front(canned) as client:
            reply = await send(client, "m0")
            stats = client.front.stats  # type: ignore[attr-defined]
    assert reply.status_code == 200 and reply.text == "one two"
    assert canned.routes == ["m0", "m0", "m0"]
    assert (stats.retried, stats.failed) == (2, 0)


async def test_an_answer_cut_after_its_first_bytes_is_not_sent_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fleet_policy, "RETRY_DELAYS_S", (0.0, 0.0, 0.0, 0.0))
    cut = Canned(lose=lambda attempt: 2 if attempt == 0 else None)  # after "one "
    never = Canned(lose=lambda attempt: 0)  # dies before its start, every time
    with anyio.fail_after(10):
        async with _front(cut) as client:
            with pytest.raises(ReplicaLost):  # the connection drops mid-answer
                await send(client, "m0")
            cut_stats = client.front.stats  # type: ignore[attr-defined]
        async with _front(never) as client:
            gone = await send(client, "m0")
            never_stats = client.front.stats  # type: ignore[attr-defined]
    assert cut.routes == ["m0"] and (cut_stats.retried, cut_stats.failed) == (0, 1)
    assert gone.status_code == 503 and "no replica could answer" in gone.text
    assert len(never.routes) == 5 and (never_stats.retried, never_stats.failed) == (4, 1)


async def test_a_request_ray_serve_refuses_is_answered_503_in_its_apis_shape() -> None:
    class Refusing:
        async def stream(
            self, request: ForwardedRequest, route: str | None
        ) -> AsyncIterator[ResponsePart]:
            raise FleetUnavailable("BackPressureError: the queues are full")
            yield  # an async generator

    with anyio.fail_after(10):
        async with _front(Refusing()) as client:
            openai_shaped = await send(client, "m0")
            ollama_shaped = await client.post("/api/chat", json={"model": "m0", "messages": []})
            stats = client.front.stats  # type: ignore[attr-defined]
    assert openai_shaped.status_code == 503
    assert openai_shaped.json()["error"]["message"] == "BackPressureError: the queues are full"
    assert ollama_shaped.status_code == 503 and "queues are full" in ollama_shaped.json()["error"]
    assert (stats.retried, stats.failed) == (0, 2)


async def test_a_replica_reports_what_its_ledger_holds() -> None:
    with anyio.fail_after(30):
        async with fleet() as (client, _, (replica,), state):
            for model in ("m0", "m1"):
                assert (await send(client, model)).status_code == 200
            await wait_until(lambda: replica.held() == {"m0", "m1"})
            assert (await send(client, "m2", session="s")).status_code == 200
            await wait_until(lambda: len(replica.held() & {"m0", "m1"}) == 1)
            held = replica.held()
            assert {"m2", session_route("m2", "s")} <= held
            await wait_until(lambda: state.state.snapshot().held_routes() == held)
            (seen,) = state.state.snapshot().replicas
            assert seen.report.sessions == {"s": "m2"}
            assert (seen.report.loads, seen.report.evictions) == (3, 1)


async def test_replicas_predict_from_what_every_replica_saw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fleet_replica, "SHARE_S", 0.05)
    state = LocalState()
    with anyio.fail_after(30):
        async with fleet(2, state=state) as (client, front, (a, b), _):
            headers = {"authorization": "Bearer client-k"}
            for i, model in enumerate(("m0", "m1", "m0", "m1")):
                reply = await client.post(
                    "/v1/chat/completions", json=_chat(model), headers=headers
                )
                assert reply.status_code == 200
                # a client's requests are seconds apart: each reaches the state in turn
                await wait_until(lambda n=i + 1: state.state.snapshot().observations == n)
            assert {name for _, name in front._forwarder.sent} == {"r0", "r1"}  # type: ignore[attr-defined]
            await anyio.sleep(0.2)  # a share round after the last observation
            for replica in (a, b):
                assert replica._next.predict("client-k", "m0") == "m1"


async def test_the_shared_state_counts_transitions_and_ages_reports() -> None:
    now = [0.0]
    state = FleetState(clock=lambda: now[0], stale_s=5.0)
    await state.observe(encode([Observation("k", "a"), Observation("k", "b")]))
    await state.report(encode(ReplicaReport(replica="r1", routes=["a"])))
    now[0] = 4.0
    await state.report(encode(ReplicaReport(replica="r0", routes=["b"])))
    assert msgspec.msgpack.decode(await state.transitions()) == {
        "k": {"a": {"b": 1}},
        "": {"a": {"b": 1}},
    }
    assert state.snapshot().held_routes() == {"a", "b"}
    now[0] = 6.0
    view = VIEW.decode(await state.view())
    assert [(s.report.replica, s.live) for s in view.replicas] == [("r0", True), ("r1", False)]
    assert view.held_routes() == {"b"}
    await state.forget("r0")
    assert [s.report.replica for s in state.snapshot().replicas] == ["r1"]
