"""The overhead microbench runs end to end (tiny sizes; timings are the benchmark's job)."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest

from swapos.bench import cli
from swapos.bench.overhead.command import OverheadReport, targets
from swapos.bench.overhead.events import phase_events
from swapos.bench.overhead.measure import (
    RecorderThroughput,
    hop_latency,
    measure_hop,
    measure_orchestration,
    measure_recorder,
    percentile,
)
from swapos.messages.events import EVENT_DECODER, TaskFinished, TaskStarted

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("actor", ["echo", "kvcache"])
async def test_hop_measures_round_trips_through_an_actor(actor: str, anyio_backend: str) -> None:
    with anyio.fail_after(10):
        hop = await measure_hop(50, actor=actor, warmup=5)  # type: ignore[arg-type]
    assert hop.iterations == 50 and hop.backend == anyio_backend
    assert 0 < hop.hop_median_us <= hop.hop_p90_us
    assert hop.round_trip_median_us == pytest.approx(2 * hop.hop_median_us)


async def test_recorder_writes_every_event_to_disk(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with anyio.fail_after(10):
        rec = await measure_recorder(500, path)
    data = await anyio.Path(path).read_bytes()
    lines = data.splitlines()
    assert rec.events == len(lines) == 500
    assert rec.bytes == len(data)
    assert rec.events_per_s > 0
    assert all(EVENT_DECODER.decode(line) for line in lines)


def test_workload_is_whole_tasks_of_realistic_events() -> None:
    events = phase_events(4 * 45 + 2)
    assert len(events) == 182
    assert isinstance(events[0], TaskStarted) and isinstance(events[-1], TaskFinished)


def test_percentile_is_the_nearest_rank_from_below() -> None:
    samples = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0, 9.0, 8.0, 7.0, 6.0]
    assert percentile(samples, 0.9) == 10.0
    assert percentile(samples, 0.5) == 6.0
    assert percentile(samples, 0.0) == 1.0
    assert percentile(samples, 1.0) == 10.0  # never past the last sample


def test_a_hop_is_half_a_round_trip_in_microseconds() -> None:
    samples_ns = [10_000, 20_000, 30_000, 40_000]  # 10..40 us round trips
    hop = hop_latency(samples_ns, 0.0004, actor="echo", backend="trio")
    assert hop.iterations == 4 and hop.backend == "trio"
    assert hop.round_trip_median_us == 25.0 and hop.hop_median_us == 12.5
    assert hop.round_trip_p90_us == 40.0 and hop.hop_p90_us == 20.0
    assert hop.hop_cpu_us == pytest.approx(50.0)  # 400 us CPU / 4 round trips / 2


def test_targets_check_the_echo_hop_and_every_recorder() -> None:
    fast = hop_latency([40_000], 0.0, actor="echo", backend="asyncio")  # hop 20 us: met
    slow = hop_latency([40_002], 0.0, actor="echo", backend="trio")  # just over
    kv = hop_latency([10**6], 0.0, actor="kvcache", backend="asyncio")  # not a target
    rec = RecorderThroughput(
        backend="asyncio", events=1, seconds=1.0, events_per_s=99_999.0, bytes=1, flushes=1,
        events_per_cpu_s=1.0, encode_only_events_per_s=1.0, aggregate_only_events_per_s=1.0,
    )  # fmt: skip
    checks = {(c.metric, c.backend): c.met for c in targets([fast, slow, kv], [rec])}
    assert checks == {
        ("hop median (echo)", "asyncio"): True,
        ("hop median (echo)", "trio"): False,
        ("recorder events/s", "asyncio"): False,
    }


async def test_orchestration_runs_one_token_phases(tmp_path: Path) -> None:
    with anyio.fail_after(20):
        orch = await measure_orchestration(20, event_log=tmp_path / "events.jsonl")
    assert orch.phases == 20
    assert orch.per_phase_us > 0


def test_cli_writes_a_report_with_targets(tmp_path: Path) -> None:
    out = tmp_path / "overhead.json"
    argv = ["overhead", "--hops", "20", "--events", "200", "--phases", "10", "--out", str(out)]
    assert cli.main([*argv, "--backend", "asyncio", "--dir", str(tmp_path)]) == 0
    rep = msgspec.json.decode(out.read_bytes(), type=OverheadReport)
    assert [h.actor for h in rep.hops] == ["echo", "kvcache"]
    assert {t.metric for t in rep.targets} == {"hop median (echo)", "recorder events/s"}
