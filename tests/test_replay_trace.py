"""Replay rebuilds a recorded run exactly; the trace shows a prefetch overlapping generation."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from swapos.backends.fake_script import FakeModelScript
from swapos.bench import cli
from swapos.bench.replay import load_events, replay
from swapos.bench.spans import swaps
from swapos.bench.trace import chrome_trace
from swapos.data.sampling import SamplingParams
from swapos.errors import EventLogError, SwapOSError
from swapos.messages.commands import PhaseSpec
from swapos.messages.events import EVENT_DECODER, SCHEMA_VERSION, RunStarted
from swapos.records.schema import RunSummary
from swapos.testing import FakeClock
from tests.fakes import fake_system

pytestmark = pytest.mark.anyio

TEN_TOKENS = " ".join(f"w{i}" for i in range(10))


def phase(model: str) -> PhaseSpec:
    return PhaseSpec(
        phase="gen", model=model, prompt=f"prompt for {model}", params=SamplingParams()
    )


async def record_run(path: Path) -> RunSummary:
    """Two tasks over three models, budget for two: b is prefetched during a's generation,
    and c's load evicts. Returns the live summary, read after the system closed."""
    clock = FakeClock()
    scripts = {
        m: FakeModelScript(load_s=2.0, token_s=0.3, reply=TEN_TOKENS, footprint_bytes=100)
        for m in ("a", "b", "c")
    }
    with anyio.fail_after(10):
        async with (
            clock.autojump(),
            fake_system(scripts, budget=200, clock=clock, event_log=path) as (system, _),
        ):
            first = await system.run_phases("t1", [phase("a"), phase("b")])
            second = await system.run_phases("t2", [phase("c"), phase("a")])
    assert first.error is None and second.error is None
    assert first.records[1].load_hidden_s == pytest.approx(2.0)
    return system.summary()


@pytest.fixture
def recorded(tmp_path: Path, anyio_backend: str) -> tuple[Path, RunSummary]:
    """A run recorded on each anyio backend: the log's path and the live summary."""
    path = tmp_path / "events.jsonl"
    return path, anyio.run(record_run, path, backend=anyio_backend)


async def test_replay_equals_the_live_summary_exactly(tmp_path: Path) -> None:
    live = await record_run(tmp_path / "events.jsonl")
    replayed = replay(tmp_path / "events.jsonl")
    assert replayed.phases_total == 4 and replayed.evictions >= 1
    assert msgspec.to_builtins(replayed) == msgspec.to_builtins(live)


def test_every_line_decodes_and_the_first_is_the_header(recorded: tuple[Path, RunSummary]) -> None:
    lines = recorded[0].read_bytes().splitlines()
    events = [EVENT_DECODER.decode(line) for line in lines]
    assert isinstance(events[0], RunStarted)
    assert events[0].schema_version == SCHEMA_VERSION
    assert not any(isinstance(ev, RunStarted) for ev in events[1:])


def test_truncated_last_line_is_tolerated_and_reported(recorded: tuple[Path, RunSummary]) -> None:
    path, live = recorded
    complete, _ = load_events(path)
    data = path.read_bytes()
    path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 20])  # cut mid-line
    events, warnings = load_events(path)
    assert len(events) == len(complete) - 1
    assert len(warnings) == 2 and f"line {len(complete)}" in warnings[0]
    assert "no RunFinished event" in warnings[1]  # the cut line was RunFinished
    assert replay(path).results == live.results  # only RunFinished was lost


def test_a_killed_run_is_reported_unfinished_with_what_it_holds(
    recorded: tuple[Path, RunSummary],
) -> None:
    """``kill -9`` mid-task: no RunFinished, a task started and never finished."""
    path, live = recorded
    lines = path.read_bytes().splitlines(keepends=True)
    last_finish = max(i for i, line in enumerate(lines) if b'"TaskFinished"' in line)
    path.write_bytes(b"".join(lines[:last_finish]))
    _, warnings = load_events(path)
    assert len(warnings) == 1 and "no RunFinished event: the run was killed" in warnings[0]
    finished = len(live.results) - 1
    assert f"holds {finished} finished task(s) and 1 unfinished" in warnings[0]
    assert len(replay(path).results) == finished


def _rewrite(path: Path, index: int, line: bytes | None) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    if line is None:
        del lines[index]
    else:
        lines[index] = line
    path.write_bytes(b"".join(lines))


def test_corrupt_middle_line_is_an_error_naming_the_line(
    recorded: tuple[Path, RunSummary],
) -> None:
    _rewrite(recorded[0], 2, b'{"type": "PhaseStarted", "t": "soon"}\n')
    with pytest.raises(EventLogError, match=r"line 3 .* corrupt"):
        load_events(recorded[0])


def test_newer_schema_is_an_error_saying_to_upgrade(recorded: tuple[Path, RunSummary]) -> None:
    path = recorded[0]
    header = json.loads(path.read_bytes().splitlines()[0])
    header["schema_version"] = SCHEMA_VERSION + 1
    _rewrite(path, 0, json.dumps(header).encode() + b"\n")
    with pytest.raises(EventLogError, match=r"newer.*upgrade swapos"):
        load_events(path)


def _as_schema(line: bytes, version: int) -> bytes:
    """``line`` as schema ``version`` wrote it. Before 3: no ``run_id``; before 2:
    GenerationFinished's numbers flat, with ``hit_cap``."""
    event = json.loads(line)
    if event["type"] == "RunStarted":
        event["schema_version"] = version
    if version < 3:
        event.pop("run_id", None)
    if version < 2 and event["type"] == "GenerationFinished":
        stats = event.pop("stats")
        event.update(stats, hit_cap=stats["stop_reason"] == "length")
    return json.dumps(event).encode()


def _runs_named_by_task(summary: RunSummary) -> dict[str, Any]:
    """``summary`` as a log without run ids replays it: each run is named by its task id."""
    out: dict[str, Any] = msgspec.to_builtins(summary)
    for result in out["results"]:
        result["run_id"] = result["task_id"]
    return out


def test_a_schema_1_log_replays_to_the_same_summary(recorded: tuple[Path, RunSummary]) -> None:
    path, live = recorded
    lines = path.read_bytes().splitlines()
    old = [_as_schema(line, 1) for line in lines]
    assert sum(b'"hit_cap": false' in line for line in old) == 4  # one per phase
    path.write_bytes(b"\n".join(old) + b"\n")
    with pytest.raises(msgspec.ValidationError):  # today's decoder alone cannot read it
        [EVENT_DECODER.decode(line) for line in old]
    assert msgspec.to_builtins(replay(path)) == _runs_named_by_task(live)


def test_a_schema_2_log_keys_its_runs_by_task_id(recorded: tuple[Path, RunSummary]) -> None:
    path, live = recorded
    old = [_as_schema(line, 2) for line in path.read_bytes().splitlines()]
    assert not any(b'"run_id"' in line for line in old)
    path.write_bytes(b"\n".join(old) + b"\n")
    replayed = replay(path)
    assert [r.run_id for r in replayed.results] == ["t1", "t2"]
    assert [len(r.phases) for r in replayed.results] == [2, 2]
    assert msgspec.to_builtins(replayed) == _runs_named_by_task(live)


def test_log_without_header_is_an_error(recorded: tuple[Path, RunSummary]) -> None:
    _rewrite(recorded[0], 0, None)
    with pytest.raises(EventLogError, match="RunStarted header"):
        load_events(recorded[0])


def _spans(trace: dict[str, Any], cat: str) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == cat]


def test_trace_is_well_formed_and_shows_prefetch_overlapping_generation(
    recorded: tuple[Path, RunSummary],
) -> None:
    events, _ = load_events(recorded[0])
    trace = json.loads(json.dumps(chrome_trace(events)))
    for ev in trace["traceEvents"]:
        assert {"ph", "ts", "pid", "tid"} <= ev.keys()
        if ev["ph"] == "X":
            assert ev["dur"] >= 0
    lanes = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {"router", "generator", "prefetcher", "evictor", "model a", "model b"} <= lanes
    prefetches = [e for e in _spans(trace, "load") if e["args"]["speculative"]]
    generations = _spans(trace, "prefill") + _spans(trace, "decode")
    assert prefetches and generations
    assert any(
        p["ts"] < g["ts"] + g["dur"] and g["ts"] < p["ts"] + p["dur"]
        for p in prefetches
        for g in generations
        if g["args"]["model"] != p["name"].split()[1]
    )


def test_swaps_pair_every_load_and_eviction(recorded: tuple[Path, RunSummary]) -> None:
    path, live = recorded
    events, _ = load_events(path)
    found = swaps(events)
    loaded = [s for s in found if s.kind == "load" and s.outcome == "loaded"]
    assert len(loaded) == live.loads
    assert any(s.speculative for s in loaded)
    assert all(s.duration_s >= 0 for s in found)


def test_cli_replay_writes_summary_and_trace(
    recorded: tuple[Path, RunSummary], tmp_path: Path
) -> None:
    path, live = recorded
    out, trace = tmp_path / "summary.json", tmp_path / "trace.json"
    code = cli.main(["replay", str(path), "--json", str(out), "--trace", str(trace)])
    assert code == 0
    assert msgspec.json.decode(out.read_bytes(), type=RunSummary) == live
    assert json.loads(trace.read_text())["traceEvents"]


def test_plot_without_matplotlib_says_how_to_install(
    recorded: tuple[Path, RunSummary], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events, _ = load_events(recorded[0])
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    from swapos.bench.plot import plot_timeline

    with pytest.raises(SwapOSError, match=r"swapos\[plot\]"):
        plot_timeline(events, tmp_path / "t.png")


def test_plot_draws_a_png(recorded: tuple[Path, RunSummary], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    events, _ = load_events(recorded[0])
    from swapos.bench.plot import plot_timeline

    plot_timeline(events, tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes().startswith(b"\x89PNG")
