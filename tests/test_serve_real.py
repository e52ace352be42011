"""``python -m swapos.serve`` with the real Qwen2.5-Coder 0.5B (``small`` in the default
profile): one short chat streamed through the server by the ``openai`` client, with the
server on asyncio and on trio."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
# The model's greedy answer to this chat (tests/test_real_chat.py pins the same text).
MESSAGES = [
    {"role": "system", "content": "You are an expert Python programmer."},
    {
        "role": "user",
        "content": "Write a Python function `square(x)` that returns x squared. "
        "Reply with one ```python code block.",
    },
]
EXPECTED = "```python\ndef square(x):\n    return x * x\n```"


@pytest.fixture(params=["asyncio", "trio"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The server in a subprocess on a free loopback port; its base URL and event log."""
    log = tmp_path / "events.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "swapos.serve", "--profile", "default", "--port", "0"]
    cmd.append("--no-calibrate")  # never writes this machine's decode costs
    cmd += ["--event-log", str(log), "--async-backend", request.param]
    cmd += ["--kv-dir", str(tmp_path / "kv")]  # not the user's cache
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        base = None
        for line in proc.stderr:  # the banner names the port
            found = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
            if found:
                base = found.group(1)
                break
        assert base is not None, "the server exited before serving"
        deadline = time.monotonic() + 120
        while httpx.get(base + "/health").status_code != 200:
            assert time.monotonic() < deadline, "the server never became healthy"
            time.sleep(0.05)
        yield base, log
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0  # Ctrl-C: a clean shutdown
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def test_the_real_05b_streams_a_short_chat_through_the_server(
    server: tuple[str, Path],
) -> None:
    base, log = server
    with (
        openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=300) as c,
        c.chat.completions.create(
            model="small",
            messages=MESSAGES,  # type: ignore[arg-type]
            max_tokens=40,
            temperature=0,
            stream=True,
        ) as events,
    ):
        chunks = list(events)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == EXPECTED
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    timings = last.model_extra["swapos"]
    assert timings["load_s"] > 0  # the first request loads the model
    assert timings["prefill_tokens"] == last.usage.prompt_tokens
    assert last.usage.completion_tokens == last.model_extra["eval_count"] > 5
    assert log.exists()
