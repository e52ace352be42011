"""A server's event log: every request is a phase of its own task, so ``bench replay``
rebuilds the numbers the responses reported and ``bench trace`` draws them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from serve_fakes import chat, in_process

from swapos.backends.fake_script import FakeModelScript
from swapos.bench import cli
from swapos.bench.replay import load_events, replay
from swapos.bench.trace import chrome_trace
from swapos.records.schema import RunSummary
from swapos.testing import FakeClock

SCRIPTS = {
    "a": FakeModelScript(reply="one two three four", load_s=2.0, token_s=1.0),
    "b": FakeModelScript(reply="five six", load_s=1.5, token_s=1.0),
}


async def test_replay_and_trace_of_a_servers_log(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    clock = FakeClock()
    answers: list[dict[str, Any]] = []
    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            in_process(SCRIPTS, budget=200, clock=clock, event_log=log) as s,
        ):
            for model in ["a", "b", "a", "b"]:
                r = await s.client.post("/v1/chat/completions", json=chat(model))
                answers.append(r.json())
            r = await s.client.post("/v1/completions", json={"model": "b", "prompt": "go"})
            answers.append(r.json())
            live = s.system.summary()
    replayed = replay(log)
    assert msgspec.to_builtins(replayed) == msgspec.to_builtins(live)
    assert replayed.phases_total == 5
    by_task = {t.task_id: t.phases[0] for t in replayed.results}
    for answer in answers:
        record = by_task[answer["id"]]  # the response id is the task id of the log
        timings = answer["swapos"]
        assert record.load_s == pytest.approx(timings["load_s"])
        assert record.load_hidden_s == pytest.approx(timings["load_hidden_s"])
        assert record.tokens == answer["usage"]["completion_tokens"]
    assert [p.phase for t in replayed.results for p in t.phases] == ["chat"] * 4 + ["text"]

    events, problems = load_events(log)
    assert problems == []
    trace = json.loads(json.dumps(chrome_trace(events)))
    lanes = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {"router", "generator", "model a", "model b"} <= lanes
    decodes = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "decode"]
    assert len(decodes) == 5

    out = tmp_path / "summary.json"
    assert (
        cli.main(["replay", str(log), "--json", str(out), "--trace", str(tmp_path / "t.json")]) == 0
    )
    assert msgspec.json.decode(out.read_bytes(), type=RunSummary) == replayed
