"""No silence: a streamed response says how its request goes while it waits for its turn,
its model's load and its first token (swapos/serve/heartbeat.py), on the fake backend; and
what ``/running`` and ``swapos ps`` show of queued requests and loading models."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import ollama
import openai
import pytest
from serve_fakes import Served, chat, in_thread, over_http, wait_until

from swapos import cli
from swapos.backends.fake_script import FakeModelScript
from swapos.data.residency import ModelState
from swapos.serve import ServeSettings
from swapos.serve.heartbeat import Status, sse_comment, status_of
from swapos.testing import FakeClock

# "a" loads for 20 s; "b" fits only once "a" is gone.
SCRIPTS = {
    "a": FakeModelScript(reply="alpha", load_s=20.0, token_s=0.1, footprint_bytes=100),
    "b": FakeModelScript(reply="bravo charlie", load_s=2.0, token_s=0.5, footprint_bytes=100),
}
READ_TIMEOUT_S = 5.0
STEP_S, REAL_STEP_S = 1.0, 0.3
"""The fake clock advances STEP_S every REAL_STEP_S of real time (see the must-show test)."""


def row(state: str, progress: float | None = None) -> ModelState:
    return ModelState(model="b", state=state, leases=0, footprint_bytes=0, load_progress=progress)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("position", "admitted", "model_row", "status"),
    [
        (2, False, None, Status(stage="queued", model="b", position=2)),
        (1, False, row("ready"), Status(stage="queued", model="b", position=1)),
        (0, True, None, Status(stage="loading", model="b")),
        (0, True, row("absent"), Status(stage="loading", model="b")),
        (0, True, row("loading"), Status(stage="loading", model="b")),
        (0, True, row("loading", 0.5), Status(stage="loading", model="b", progress=0.5)),
        (0, True, row("ready"), Status(stage="running", model="b")),
    ],
)
def test_a_requests_status(
    position: int, admitted: bool, model_row: ModelState | None, status: Status
) -> None:
    assert status_of("b", position=position, admitted=admitted, row=model_row) == status


@pytest.mark.parametrize(
    ("status", "line"),
    [
        (Status(stage="queued", model="b", position=2), ": queued, position 2 for 'b'"),
        (Status(stage="loading", model="b"), ": loading 'b', waiting for room"),
        (Status(stage="loading", model="b", progress=0.25), ": loading 'b', 25%"),
        (Status(stage="running", model="b"), ": running on 'b'"),
    ],
)
def test_a_status_as_an_sse_comment(status: Status, line: str) -> None:
    assert sse_comment(status) == f"{line}\n\n".encode()


async def drive(clock: FakeClock, until: anyio.Event) -> None:
    """Advance the fake clock STEP_S every REAL_STEP_S of real time until ``until``."""
    while not until.is_set():
        await anyio.sleep(REAL_STEP_S)
        clock.advance(STEP_S)


async def start_a(s: Served, tg: anyio.abc.TaskGroup) -> None:
    """A request for "a", whose 20-second load the next request waits behind."""

    async def ask() -> None:
        r = await s.client.post("/v1/chat/completions", json=chat("a"), timeout=120)
        assert r.json()["choices"][0]["message"]["content"] == "alpha"

    tg.start_soon(ask)
    await wait_until(lambda: s.system.residency().state("a") == "loading")


def openai_stream(s: Served) -> tuple[str, float]:
    """Stream a chat with "b" through the real ``openai`` client (read timeout 5 s)."""
    start = time.monotonic()
    url = s.base_url + "/v1"
    with (
        openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=READ_TIMEOUT_S) as c,
        c.chat.completions.create(
            model="b", messages=[{"role": "user", "content": "hi"}], stream=True
        ) as events,
    ):
        text = "".join(ch.choices[0].delta.content or "" for ch in events if ch.choices)
    return text, time.monotonic() - start


def ollama_stream(s: Served) -> tuple[str, float, list[Any]]:
    """Stream a chat with "b" through the real ``ollama`` client (read timeout 5 s)."""
    start = time.monotonic()
    with ollama.Client(host=s.base_url, timeout=READ_TIMEOUT_S) as c:
        parts = list(c.chat(model="b", messages=[{"role": "user", "content": "hi"}], stream=True))
    text = "".join(p.message.content or "" for p in parts)
    return text, time.monotonic() - start, parts


@pytest.mark.slow
@pytest.mark.parametrize("client", ["openai", "ollama"])
async def test_a_client_with_a_5s_read_timeout_streams_a_request_that_waits_20s(
    client: str,
) -> None:
    """A streamed request for "b" waits ~22 s of the fake clock: behind "a"'s 20-second load
    and request, then for its own 2-second load. The fake clock is driven by hand, one second
    every 0.3 s of real time, so the wait lasts ~6.6 real seconds, longer than the client's
    5-second read timeout; heartbeats every 5 fake seconds (1.5 real seconds) keep it
    reading. Real time has to pass for a read timeout to mean anything, and scaling the
    clock (rather than sleeping 20 real seconds) keeps the test short; the next test shows
    the same client cut off without heartbeats."""
    clock = FakeClock()
    with anyio.fail_after(90):
        async with over_http(SCRIPTS, budget=100, clock=clock) as s:
            got: dict[str, Any] = {}
            done = anyio.Event()

            async def stream() -> None:
                got["out"] = await in_thread(
                    lambda: openai_stream(s) if client == "openai" else ollama_stream(s)
                )
                done.set()

            async with anyio.create_task_group() as tg:
                await start_a(s, tg)
                tg.start_soon(stream)
                tg.start_soon(drive, clock, done)
            text, real_s = got["out"][:2]
            assert text == "bravo charlie"
            assert real_s > READ_TIMEOUT_S + 1  # it did wait longer than the read timeout
            admitted = [a for a in s.server.scheduler.admissions if a.model == "b"]
            assert admitted[0].admitted - admitted[0].arrived >= 20.0  # on the fake clock
            if client == "ollama":  # the statuses: empty pieces (their swapos field dropped)
                parts = got["out"][2]
                assert all(not p.message.content for p in parts[:5])  # at 0, 5, 10, 15, 20 s
                assert parts[-1].done and not any(p.done for p in parts[:-1])


@pytest.mark.slow
async def test_without_heartbeats_the_same_client_is_cut_off() -> None:
    clock = FakeClock()
    settings = ServeSettings(heartbeat_s=0)
    with anyio.fail_after(90):
        async with over_http(SCRIPTS, budget=100, clock=clock, settings=settings) as s:
            failed: list[BaseException] = []
            done = anyio.Event()

            async def stream() -> None:
                try:
                    await in_thread(lambda: openai_stream(s))
                except Exception as exc:
                    failed.append(exc)
                done.set()

            async with anyio.create_task_group() as tg:
                await start_a(s, tg)
                tg.start_soon(stream)
                tg.start_soon(drive, clock, done)
                await done.wait()
                async with clock.autojump():  # let "a" finish
                    await wait_until(lambda: not s.server.scheduler.snapshot()[0].running)
            assert failed, "the client was not cut off: the test would show nothing"
            assert "Timeout" in type(failed[0]).__name__, failed


async def sse_lines(s: Served, body: dict[str, Any], lines: list[str]) -> None:
    """Stream ``body`` to the OpenAI route, appending each non-empty line as it comes."""
    async with s.client.stream("POST", "/v1/chat/completions", json=body, timeout=60) as r:
        async for line in r.aiter_lines():
            if line:
                lines.append(line)


async def test_the_role_chunk_goes_first_then_the_queue_position_then_the_load() -> None:
    clock = FakeClock()  # by hand: nothing moves until the test advances it
    with anyio.fail_after(60):
        async with over_http(SCRIPTS, budget=100, clock=clock) as s:
            lines: list[str] = []
            async with anyio.create_task_group() as tg:
                await start_a(s, tg)
                tg.start_soon(sse_lines, s, chat("b", stream=True), lines)
                await wait_until(lambda: len(lines) == 2)
                # the role chunk, before "b" is admitted or loaded; then its place in line
                first = json.loads(lines[0].removeprefix("data: "))
                assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
                assert lines[1] == ": queued, position 1 for 'b'"
                assert s.system.residency().state("b") == "absent"
                running = (await s.client.get("/running")).json()
                queue = next(q for q in running["queues"] if q["model"] == "b")
                assert [r["position"] for r in queue["requests"]] == [1]
                assert queue["requests"][0]["id"].startswith("chatcmpl")
                clock.advance(5.0)  # 5 s of silence: told again
                await wait_until(lambda: len(lines) == 3)
                assert lines[2] == ": queued, position 1 for 'b'"
                async with clock.autojump():
                    await wait_until(lambda: lines[-1] == "data: [DONE]")
            comments = [ln for ln in lines if ln.startswith(":")]
            # admitted while "b" is not loaded: told at once, before its tokens
            told = next(i for i, ln in enumerate(lines) if ln.startswith(": loading 'b'"))
            assert told < next(i for i, ln in enumerate(lines) if "bravo" in ln)
            assert comments[:4] == [": queued, position 1 for 'b'"] * 4  # at 0, 5, 10, 15 s


async def test_ollamas_stream_says_the_same_in_empty_pieces() -> None:
    clock = FakeClock()  # by hand, then on its own
    body = {"model": "b", "messages": [{"role": "user", "content": "hi"}]}
    with anyio.fail_after(60):
        async with over_http(SCRIPTS, budget=100, clock=clock) as s:
            lines: list[dict[str, Any]] = []

            async def read() -> None:
                async with s.client.stream("POST", "/api/chat", json=body, timeout=60) as r:
                    async for line in r.aiter_lines():
                        lines.append(json.loads(line))

            async with anyio.create_task_group() as tg:
                await start_a(s, tg)
                tg.start_soon(read)
                await wait_until(lambda: len(lines) == 1)
                assert lines[0]["done"] is False and lines[0]["message"]["content"] == ""
                assert lines[0]["swapos"] == {"stage": "queued", "model": "b", "position": 1}
                async with clock.autojump():
                    await wait_until(lambda: bool(lines) and lines[-1]["done"])
            stages = [ln["swapos"]["stage"] for ln in lines if not ln["done"] and "swapos" in ln]
            assert stages[:4] == ["queued"] * 4 and "loading" in stages[4:]  # at 0, 5, 10, 15 s
            assert "".join(ln["message"]["content"] for ln in lines) == "bravo charlie"


async def test_swapos_ps_shows_load_progress_and_queued_positions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = FakeClock()  # by hand
    with anyio.fail_after(60):
        async with over_http(SCRIPTS, budget=100, clock=clock) as s:

            async def ask_b() -> None:
                await s.client.post("/v1/chat/completions", json=chat("b"), timeout=60)

            async with anyio.create_task_group() as tg:
                await start_a(s, tg)
                for _ in range(2):
                    tg.start_soon(ask_b)
                await wait_until(lambda: s.server.scheduler.snapshot()[-1].waiting == 2)
                clock.advance(5.0)  # a quarter of "a"'s load
                await wait_until(lambda: progress(s, "a") == 0.25)
                running = (await s.client.get("/running")).json()
                assert {m["model"]: m["load_progress"] for m in running["models"]}["a"] == 0.25
                assert await in_thread(lambda: cli.main(["ps", "--url", s.base_url])) == 0
                out = capsys.readouterr().out
                cells = next(
                    [c.strip() for c in line.split("│")[1:-1]]
                    for line in out.splitlines()
                    if line.startswith("│ a ")
                )
                assert cells[:2] == ["a", "loading 25%"]
                assert "queued requests" in out
                positions = [
                    line.split("│")[2].strip()
                    for line in out.splitlines()
                    if line.startswith("│ b ") and "chatcmpl" in line
                ]
                assert positions == ["1", "2"]
                async with clock.autojump():
                    await wait_until(
                        lambda: (
                            not any(q.waiting or q.running for q in s.server.scheduler.snapshot())
                        )
                    )


def progress(s: Served, model: str) -> float | None:
    row = s.system.residency().get(model)
    return row.load_progress if row is not None else None
