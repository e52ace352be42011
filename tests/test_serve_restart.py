"""A server killed mid-request and started again: nothing it had finished is lost.

``kill -9`` leaves the event log without ``RunFinished`` and perhaps with half a line; the
restarted server keeps that log under another name (one run per log) and starts its own, and
the KV cache's disk tier gives the conversations their prefixes back.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from serve_fakes import chat, in_process
from serve_process import serve_process

from swapos.backends.fake_script import FakeModelScript
from swapos.bench.replay import load_events, replay
from swapos.bench.report import event_logs
from swapos.models.bundled import bundled_model_path
from swapos.records.log_files import kept_name
from swapos.testing import FakeClock

# --- where an earlier run's log goes ---------------------------------------------------------

T = 1796636100.0  # 2026-12-07 09:35:00 UTC


@pytest.mark.parametrize(
    ("taken", "expected"),
    [
        (set(), "events.jsonl.2026-12-07T09-35-00Z"),
        ({"events.jsonl.2026-12-07T09-35-00Z"}, "events.jsonl.2026-12-07T09-35-00Z-2"),
        (
            {"events.jsonl.2026-12-07T09-35-00Z", "events.jsonl.2026-12-07T09-35-00Z-2"},
            "events.jsonl.2026-12-07T09-35-00Z-3",
        ),
    ],
)
def test_an_earlier_log_is_kept_beside_under_the_time_of_its_last_write(
    taken: set[str], expected: str
) -> None:
    path = Path("/logs/events.jsonl")
    kept = kept_name(path, T, lambda p: p.name in taken)
    assert kept == Path("/logs") / expected
    assert not kept.match("events*.jsonl")  # a bench folder's set of logs never takes it in


# --- on the fake backend: a log cut as kill -9 leaves it, then a restart ----------------------

SCRIPTS = {"a": FakeModelScript(reply="one two three", load_s=1.0, token_s=0.5)}


async def _serve_chats(log: Path, texts: list[str]) -> Any:
    clock = FakeClock()
    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            in_process(SCRIPTS, budget=100, clock=clock, event_log=log) as s,
        ):
            for text in texts:
                r = await s.client.post("/v1/chat/completions", json=chat("a", text))
                assert r.status_code == 200
            return s.system.summary()


def _listed(folder: Path) -> list[Path]:
    return sorted(folder.iterdir())


def _cut_as_killed(log: Path) -> int:
    """Drop the log's last task's end and everything after, ending mid-line, as ``kill -9``
    during a write leaves it; the number of tasks it still holds finished."""
    lines = log.read_bytes().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if b'"TaskFinished"' in line)
    log.write_bytes(b"".join(lines[:last]) + lines[last][:25])
    return sum(b'"TaskFinished"' in line for line in lines[:last])


async def test_a_restart_keeps_the_killed_runs_log_and_starts_its_own(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    await _serve_chats(log, ["first", "second", "third"])
    finished = _cut_as_killed(log)
    assert finished == 2

    live = await _serve_chats(log, ["after the restart"])

    kept = [p for p in _listed(tmp_path) if p != log]
    assert len(kept) == 1 and kept[0].name.startswith("events.jsonl.")
    assert event_logs(tmp_path) == [log]  # the kept log is not one of this folder's set
    _, warnings = load_events(kept[0])
    assert len(warnings) == 2
    assert "truncated or corrupt and was ignored" in warnings[0]
    assert "the run was killed" in warnings[1] and "holds 2 finished task(s)" in warnings[1]
    assert len(replay(kept[0]).results) == finished
    _, warnings = load_events(log)
    assert warnings == []
    assert msgspec.to_builtins(replay(log)) == msgspec.to_builtins(live)


async def test_an_empty_file_at_the_path_is_written_over_not_kept(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.touch()
    await _serve_chats(log, ["hello"])
    assert _listed(tmp_path) == [log]
    assert load_events(log)[1] == []


# --- the command line, with the real Gemma 3 270M: kill -9 mid 8 streamed requests -----------

CONVERSATIONS = [
    [
        {"role": "system", "content": f"You are assistant number {n}. Answer briefly."},
        {"role": "user", "content": f"Name {n + 2} fruits, one per line."},
    ]
    for n in range(8)
]


def _ask(base: str, messages: list[dict[str, str]], max_tokens: int) -> dict[str, Any]:
    body = {"model": "gemma", "messages": messages, "max_tokens": max_tokens, "temperature": 0}
    r = httpx.post(base + "/v1/chat/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def _stream(base: str, messages: list[dict[str, str]], first: threading.Event) -> None:
    """Stream an answer until the server dies; ``first`` is set at its first content."""
    body = {"model": "gemma", "messages": messages, "max_tokens": 400, "stream": True}
    try:
        with httpx.stream("POST", base + "/v1/chat/completions", json=body, timeout=300) as r:
            for line in r.iter_lines():
                choices = json.loads(line[6:])["choices"] if line.startswith("data: {") else []
                if choices and choices[0]["delta"].get("content"):
                    first.set()
    except httpx.HTTPError:
        pass  # the server was killed under it


@pytest.mark.real_model
@pytest.mark.slow
def test_kill_9_mid_eight_streamed_requests_then_a_restart_loses_nothing_finished(
    tmp_path: Path,
) -> None:
    models, kv, log = tmp_path / "models", tmp_path / "kv", tmp_path / "events.jsonl"
    models.mkdir()
    os.link(bundled_model_path("gemma3-270m-q4_k_m"), models / "gemma.gguf")
    args = (
        "--models-dir",
        str(models),
        "--kv-dir",
        str(kv),
        "--event-log",
        str(log),
        "--preload",
        "gemma",
        "--slots",
        "4",
    )
    seconds: list[list[dict[str, str]]] = []
    with serve_process(*args) as (proc, base):
        for messages in CONVERSATIONS:  # each conversation's first turn, finished
            answer = _ask(base, messages, 8)["choices"][0]["message"]["content"]
            seconds.append(
                [
                    *messages,
                    {"role": "assistant", "content": answer},
                    {"role": "user", "content": "And two more?"},
                ]
            )
        deadline = time.monotonic() + 60
        while len(list(kv.rglob("*.kv"))) < len(CONVERSATIONS):  # written through
            assert time.monotonic() < deadline, "the first turns' KV states never reached disk"
            time.sleep(0.05)
        first = threading.Event()
        streams = [threading.Thread(target=_stream, args=(base, m, first)) for m in seconds]
        for s in streams:
            s.start()
        assert first.wait(120), "no streamed request produced a token"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for s in streams:
            s.join(60)
    events, warnings = load_events(log)
    assert any("the run was killed" in w for w in warnings)
    assert "holds 8 finished task(s)" in warnings[-1] and "unfinished" in warnings[-1]
    assert len(replay(log).results) == len(CONVERSATIONS)

    with serve_process(*args) as (proc, base):  # a new process: its RAM tier is empty
        again = [_ask(base, m, 4)["swapos"] for m in seconds]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("events.jsonl.")]
    assert len(kept) == 1 and load_events(kept[0])[0] == events  # the killed run's, as it was
    assert all(t["kv_restored_tokens"] > 0 for t in again)  # every prefix from the disk tier
    assert load_events(log)[1] == []  # the new run's log, closed cleanly
    assert len(replay(log).results) == len(CONVERSATIONS)
