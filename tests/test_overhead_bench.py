"""The overhead microbench runs end to end (tiny sizes; timings are the benchmark's job)."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest

from swapos.bench import cli
from swapos.bench.overhead import (
    OverheadReport,
    measure_hop,
    measure_orchestration,
    measure_recorder,
    phase_events,
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
