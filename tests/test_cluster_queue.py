"""The cluster driver's decisions without Ray: the work queue, worker placement, the merged
trace of several nodes' logs."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from swapos.bench.cli import main as bench_main
from swapos.bench.replay import load_events, merge, summarize
from swapos.bench.trace import cluster_trace, node_of
from swapos.cluster.protocol import Key
from swapos.cluster.queue import Item, WorkQueue
from swapos.cluster.ray_pool import NodeInfo, Placement, plan_workers
from swapos.errors import SwapOSError
from swapos.sysinfo import NODE_ENV
from swapos.testing import FakeClock
from tests.cluster_fakes import SCRIPTS, task
from tests.fakes import fake_system
from tests.fakes import pipeline_profile as profile

A: Key = ("overlap", "pipeline")
B: Key = ("overlap", "single")


def items(n: int) -> list[Item]:
    return [Item(index=i, task=task(i), keys=[A, B]) for i in range(n)]


def test_items_go_out_in_order_and_a_lost_one_comes_back_first_with_what_is_left() -> None:
    queue = WorkQueue(items(3))
    first, second = queue.take(), queue.take()
    assert first is not None and second is not None
    assert (first.task.task_id, second.task.task_id) == ("add0", "add1")
    assert queue.peek() is not None and queue.peek() == task(2)
    assert queue.lost(first, [B]) is True
    again = queue.take()
    assert again is first and again.keys == [B] and again.losses == 1
    queue.done(second)
    queue.done(again)
    last = queue.take()
    assert last is not None
    queue.done(last)
    assert queue.finished and queue.reruns == 1 and queue.given_up == []


def test_an_item_that_kills_too_many_workers_is_given_up() -> None:
    queue = WorkQueue(items(1), max_losses=2)
    item = queue.take()
    assert item is not None and queue.lost(item, [A, B]) is True
    item = queue.take()
    assert item is not None and queue.lost(item, [B]) is False
    assert queue.given_up == [item] and queue.finished and queue.reruns == 1


def test_a_lost_item_with_nothing_left_is_simply_finished() -> None:
    queue = WorkQueue(items(1))
    item = queue.take()
    assert item is not None and queue.lost(item, []) is False
    assert queue.finished and queue.given_up == [] and queue.reruns == 0


async def test_an_idle_worker_waits_for_work_that_may_come_back() -> None:
    queue = WorkQueue(items(1))
    taken = queue.take()
    assert taken is not None
    got: list[Item | None] = []

    async def idle() -> None:
        got.append(await queue.wait_for_work())
        got.append(await queue.wait_for_work())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(idle)
            await anyio.wait_all_tasks_blocked()
            assert got == []  # waiting: the item in flight may come back
            queue.lost(taken, [B])
            await anyio.wait_all_tasks_blocked()
            assert got == [taken]
            queue.done(taken)
    assert got == [taken, None]


def test_one_worker_per_node_with_its_cpus_or_n_workers_sharing_the_cpus() -> None:
    nodes = [
        NodeInfo(node_id="a", address="10.0.0.1", cpus=8),
        NodeInfo(node_id="b", address="10.0.0.2", cpus=4),
        NodeInfo(node_id="head", address="10.0.0.3", cpus=0),
    ]
    assert plan_workers(nodes, None) == [
        Placement(name="w0", cpus=8, node_id="a"),
        Placement(name="w1", cpus=4, node_id="b"),
    ]
    assert plan_workers(nodes, 3) == [Placement(name=f"w{i}", cpus=4) for i in range(3)]
    with pytest.raises(SwapOSError, match="lower --workers"):
        plan_workers(nodes, 13)
    with pytest.raises(SwapOSError, match="no node with a CPU"):
        plan_workers(nodes[2:], None)


async def test_each_nodes_log_is_its_own_process_in_the_trace_and_replays_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = []
    for i, node in enumerate(["w0@a", "w1@b"]):
        monkeypatch.setenv(NODE_ENV, node)
        clock, path = FakeClock(), tmp_path / f"events-w{i}.jsonl"
        with anyio.fail_after(30):
            async with (
                clock.autojump(),
                fake_system(SCRIPTS, budget=250, clock=clock, profile=profile(),
                            event_log=path) as (system, _),
            ):  # fmt: skip
                await system.run_task(task(i))
        paths.append(path)
    monkeypatch.delenv(NODE_ENV)
    assert NODE_ENV not in os.environ
    logs = [load_events(p)[0] for p in paths]
    assert [node_of(ev, "?") for ev in logs] == ["w0@a", "w1@b"]
    trace = cluster_trace([(node_of(ev, "?"), ev) for ev in logs])["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in trace if e["name"] == "process_name"}
    assert processes == {1: "w0@a", 2: "w1@b"}
    lanes = {(e["pid"], e["args"]["name"]) for e in trace if e["name"] == "thread_name"}
    assert {(1, "router"), (2, "router"), (1, "model coder"), (2, "model coder")} <= lanes
    spans = [e for e in trace if e["ph"] == "X"]
    assert {e["pid"] for e in spans} == {1, 2}
    merged = merge([summarize(ev) for ev in logs])
    assert [r.task_id for r in merged.results] == ["add0", "add1"]
    assert merged.loads == sum(summarize(ev).loads for ev in logs)


def test_cluster_options_without_ray_or_with_cold_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "o")
    assert bench_main(["run", "--workers", "2", "--out", out]) == 2
    assert "go with --ray" in capsys.readouterr().err
    assert bench_main(["run", "--ray", "--cold", "--out", out]) == 2
    assert "--cold is not supported with --ray" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
