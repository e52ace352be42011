"""The real ``ollama`` client streaming one short chat from the real Qwen2.5-Coder 0.5B
through the Ollama route of ``app(system)`` (Hypercorn on loopback, asyncio and trio)."""

from __future__ import annotations

from functools import partial

import anyio
import ollama
import pytest

from swapos.actors.system import open_system
from swapos.models.profile import ModelConfig, Profile
from swapos.serve import app
from swapos.serve.hosting import listening_socket, serve_http

pytestmark = [pytest.mark.real_model]

SMALL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
MESSAGES = [
    {"role": "system", "content": "You are an expert Python programmer."},
    {
        "role": "user",
        "content": "Write a Python function `square(x)` that returns x squared. "
        "Reply with one ```python code block.",
    },
]
# The model's greedy answer to this chat (tests/test_real_chat.py pins the same text).
EXPECTED = "```python\ndef square(x):\n    return x * x\n```"


def _stream(base: str) -> list[ollama.ChatResponse]:
    with ollama.Client(host=base, timeout=120) as c:
        return list(
            c.chat(model="small", messages=MESSAGES, stream=True, options={"num_predict": 40})
        )


async def test_a_streamed_chat_from_the_real_05b_through_the_ollama_route() -> None:
    profile = Profile(
        name="small only", budget="1GiB", models={"small": ModelConfig(bundled=SMALL, n_ctx=1024)}
    )
    with anyio.fail_after(180):
        async with open_system(profile) as system:
            bind, port = listening_socket()
            stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    partial(serve_http, app(system), bind=bind, shutdown_trigger=stop.wait)
                )
                parts = await anyio.to_thread.run_sync(_stream, f"http://127.0.0.1:{port}")
                stop.set()
    assert "".join(p.message.content or "" for p in parts) == EXPECTED
    assert len(parts) > 3  # streamed piece by piece
    last = parts[-1]
    assert last.done and last.done_reason == "stop"
    assert last.eval_count is not None and 5 < last.eval_count < 40
    assert last.load_duration is not None and last.load_duration > 0  # the first load, paid
    assert last.prompt_eval_count is not None and last.prompt_eval_count > 20
    assert (last.total_duration or 0) >= (last.load_duration or 0) + (last.eval_duration or 0)
