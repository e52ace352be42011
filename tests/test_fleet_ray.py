"""The fleet on a local Ray (2 CPUs, no dashboard) and Ray Serve, on the fake backend.

One Ray session and one Serve proxy serve the whole module; each test deploys its own
application and deletes it. Skipped where Ray Serve is not installed
(``pip install 'swapos[fleet]'``).
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, asynccontextmanager
from typing import Any

import anyio
import httpx
import msgspec
import openai
import pytest

from swapos.backends.fake_script import FakeModelScript
from swapos.bench.serve.command import build_args
from swapos.bench.serve.fleet import print_report, run_fleet_bench
from swapos.cluster.fleet_front import Front
from swapos.cluster.fleet_protocol import (
    PART,
    VIEW,
    FleetConfig,
    FleetView,
    ForwardedRequest,
    ResponsePart,
    encode,
)
from swapos.cluster.fleet_replica import REPLICA_HEADER, FleetReplica
from swapos.cluster.ray_fleet import deploy, start_proxy, undeploy
from swapos.models.bundled import resolve_profile
from swapos.policies.fleet import ReplicaCount
from swapos.testing import FakeClock
from tests.cluster_fakes import RAY_OPTIONS
from tests.fleet_fakes import BUDGET, FakeReplicaFactory, mixed_trace, profile, scripts

ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'swapos[fleet]'")
pytest.importorskip("ray.serve", reason="Ray Serve is not installed: pip install 'swapos[fleet]'")

pytestmark = pytest.mark.anyio

TWO = ReplicaCount(low=2, high=2)


@pytest.fixture(scope="module")
def proxy() -> Iterator[str]:
    """A local Ray and Ray Serve's proxy on a free loopback port; yields its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, **RAY_OPTIONS)
    try:
        start_proxy("127.0.0.1", port)
        yield f"http://127.0.0.1:{port}"
    finally:
        from ray import serve

        serve.shutdown()
        ray.shutdown()


@asynccontextmanager
async def deployed(
    proxy: str, name: str, factory: FakeReplicaFactory, **config: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """Fleet ``name`` deployed at ``/<name>`` (0.5 CPU a replica); a client of it."""
    cfg = FleetConfig(name=name, profile=profile(), budget_bytes=BUDGET, replica_cpus=0.5, **config)
    await anyio.to_thread.run_sync(
        lambda: deploy(cfg, route_prefix=f"/{name}", factory=factory, actor=RAY_OPTIONS)
    )
    try:
        async with httpx.AsyncClient(base_url=f"{proxy}/{name}", timeout=60) as client:
            yield client
    finally:
        await anyio.to_thread.run_sync(undeploy, name)


async def run_trace(
    client: httpx.AsyncClient, trace: list[list[str]], tag: str
) -> list[httpx.Response]:
    """Each client's requests in order (its own session and key), all clients at once."""
    replies: list[httpx.Response] = []

    async def one(i: int, models: list[str]) -> None:
        headers = {"authorization": f"Bearer {tag}-{i}", "x-swapos-session": f"{tag}-{i}"}
        for model in models:
            body = {"model": model, "messages": [{"role": "user", "content": f"{tag} {i}"}]}
            replies.append(await client.post("/v1/chat/completions", json=body, headers=headers))

    async with anyio.create_task_group() as tg:
        for i, models in enumerate(trace):
            tg.start_soon(one, i, models)
    return replies


def answered(replies: list[httpx.Response]) -> bool:
    return all(
        r.status_code == 200 and r.json()["choices"][0]["message"]["content"].startswith("this is")
        for r in replies
    )


async def fleet_loads(client: httpx.AsyncClient) -> int:
    return sum(s["report"]["loads"] for s in (await client.get("/fleet")).json()["replicas"])


SLOW_M3 = {
    **scripts(load_s=0.2, token_s=0.02),
    "m3": FakeModelScript(load_s=0.2, token_s=0.15, footprint_bytes=100,
                          reply="this is m3 speaking, hello"),
}  # fmt: skip
"""m3 generates for about a second: a replica is killed while it runs an m3 request."""


class RoundRobin:
    """Plain round-robin over replicas that know nothing of each other."""

    def __init__(self, replicas: list[FleetReplica]) -> None:
        self.replicas, self.turn = replicas, 0

    async def stream(
        self, request: ForwardedRequest, route: str | None
    ) -> AsyncIterator[ResponsePart]:
        replica = self.replicas[self.turn % len(self.replicas)]
        self.turn += 1
        async with aclosing(replica.handle(encode(request))) as parts:
            async for data in parts:
                yield PART.decode(data)


class NoState:
    async def observe(self, batch: bytes) -> None: ...

    async def transitions(self) -> bytes:
        return encode({})

    async def report(self, data: bytes) -> None: ...

    async def view(self) -> FleetView:
        return FleetView()


async def round_robin_loads(trace: list[list[str]]) -> int:
    """The same trace on two replicas behind plain round-robin, in this process (the same
    replica code on the fake backend, virtual time): their loads."""
    clock = FakeClock()
    cfg = FleetConfig(profile=profile(), budget_bytes=BUDGET)
    replicas = [
        FleetReplica(cfg, f"rr{i}", "here", BUDGET, NoState(), lambda _: None,
                     FakeReplicaFactory(SLOW_M3, clock=clock))
        for i in range(2)
    ]  # fmt: skip
    front = Front(cfg, RoundRobin(replicas), NoState())
    async with clock.autojump(), anyio.create_task_group() as tg:
        for r in replicas:
            tg.start_soon(r.serve)
            await r.ready.wait()
        transport = httpx.ASGITransport(app=front.app())
        async with httpx.AsyncClient(transport=transport, base_url="http://rr") as client:
            assert answered(await run_trace(client, trace, "rr"))
        loads = sum(r.report(frozenset()).loads for r in replicas)
        for r in replicas:
            r.stop()
    return loads


async def test_a_fleet_routes_by_residency_and_loses_no_request_when_a_replica_dies(
    proxy: str, anyio_backend: str
) -> None:
    trace, app = mixed_trace(rounds=4), f"fleet-{anyio_backend}"
    requests = sum(len(t) for t in trace)
    with anyio.fail_after(300):
        baseline = await round_robin_loads(trace)
        async with deployed(proxy, app, FakeReplicaFactory(SLOW_M3), replicas=TWO) as client:
            replies = await run_trace(client, trace, "a")
            loads = await fleet_loads(client)
            print(
                f"\nloads over {requests} requests: routing by residency {loads}, "
                f"round-robin replicas {baseline}"
            )
            assert len(replies) == requests and answered(replies)
            assert loads < baseline

            second: list[httpx.Response] = []  # the trace again; mid-way, a replica dies
            async with anyio.create_task_group() as tg:

                async def trace_again() -> None:
                    second.extend(await run_trace(client, trace, "b"))

                tg.start_soon(trace_again)
                victim = await running(app, "m3")
                await anyio.to_thread.run_sync(kill_replica, app, victim)
            front = (await client.get("/fleet")).json()["front"]
            print(f"killed replica {victim} under an m3 request; the front: {front}")
            assert len(second) == requests and answered(second)
            answering = {r.headers[REPLICA_HEADER.decode()] for r in second}
            assert len(answering - {victim}) >= 1  # the other replica, maybe the new one too
            assert front["retried"] >= 1 and front["failed"] == 0


async def running(app: str, model: str) -> str:
    """The replica whose last report shows a request of ``model`` waiting or running (read
    from the shared state itself, not the front's cached view)."""
    from ray import serve

    state = serve.get_deployment_handle("FleetState", app_name=app)
    while True:
        view = VIEW.decode(await anyio.to_thread.run_sync(lambda: state.view.remote().result()))
        for seen in view.replicas:
            if seen.live and seen.report.queues.get(model):
                return seen.report.replica
        await anyio.sleep(0.05)


def kill_replica(app: str, replica: str) -> None:
    actor = ray.get_actor(f"SERVE_REPLICA::{app}#SwapOSReplica#{replica}", namespace="serve")
    ray.kill(actor, no_restart=True)


def test_bench_serve_ray_runs_every_arm_at_a_tiny_size(proxy: str) -> None:
    args = build_args(
        ["--ray", "--sessions", "2", "--rounds", "1", "--architect-tokens", "4",
         "--editor-tokens", "4", "--replica-cpus", "0.5"]
    )  # fmt: skip
    report = anyio.run(
        lambda: run_fleet_bench(
            args, proxy=proxy, profile=profile(["m0", "m1", "m2"]), budget=BUDGET,
            factory=FakeReplicaFactory(), actor=RAY_OPTIONS,
        )
    )  # fmt: skip
    print_report(report)
    assert [a.arm for a in report.arms] == ["fleet", "one", "rr"]
    assert [a.replicas for a in report.arms] == [2, 1, 2]
    for arm in report.arms:
        assert (arm.requests, arm.errors) == (4, 0)
        assert arm.loads >= 2 and arm.swaps_per_request == arm.loads / 4 and arm.wall_s > 0


@pytest.mark.real_model
@pytest.mark.slow
def test_one_real_request_through_ray_serves_proxy_with_the_openai_client(proxy: str) -> None:
    """The bundled Qwen2.5-Coder 0.5B on one replica, asked through Ray Serve's proxy."""
    default = resolve_profile("default")
    small = msgspec.structs.replace(
        default, models={"small": default.models["small"]}, roles={"code": "small"}
    )
    cfg = FleetConfig(name="real", profile=small, budget_bytes=2 * 2**30, replica_cpus=1.0)
    deploy(cfg, route_prefix="/real", actor=RAY_OPTIONS)
    try:
        with openai.OpenAI(base_url=f"{proxy}/real/v1", api_key="none", max_retries=0,
                           timeout=600) as client:  # fmt: skip
            reply = client.chat.completions.create(
                model="small",
                messages=[
                    {"role": "user", "content": "Write a Python function that adds two numbers."}
                ],
                max_tokens=12,
            )
    finally:
        undeploy("real")
    assert reply.model == "small" and reply.choices[0].message.content
    print(f"\nthe 0.5B through Ray Serve: {reply.choices[0].message.content!r}")
