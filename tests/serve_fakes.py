"""The server on the fake backend: in process (httpx's ASGI transport) or over loopback HTTP
(Hypercorn on the test's own event loop, so asyncio and trio both serve it)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import httpx
from fakes import fake_system

from swapos.actors.system import System
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.serve import ServeSettings, app
from swapos.serve.hosting import listening_socket, serve_http
from swapos.serve.state import Server
from swapos.testing import FakeClock


@dataclass
class Served:
    system: System
    backend: FakeBackend
    server: Server
    client: httpx.AsyncClient
    base_url: str = "http://swapos.test"


def chat(model: str, text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


@asynccontextmanager
async def in_process(
    scripts: dict[str, FakeModelScript],
    *,
    budget: int,
    clock: FakeClock,
    settings: ServeSettings | None = None,
    **kwargs: Any,
) -> AsyncIterator[Served]:
    async with fake_system(scripts, budget=budget, clock=clock, **kwargs) as (system, backend):
        asgi = app(system, settings)
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url=Served.base_url) as client:
            yield Served(system, backend, asgi.state.server, client)


@asynccontextmanager
async def over_http(
    scripts: dict[str, FakeModelScript],
    *,
    budget: int,
    clock: FakeClock,
    settings: ServeSettings | None = None,
    **kwargs: Any,
) -> AsyncIterator[Served]:
    """Hypercorn on a free loopback port, on this event loop; ``base_url`` points at it."""
    async with fake_system(scripts, budget=budget, clock=clock, **kwargs) as (system, backend):
        asgi = app(system, settings)
        bind, port = listening_socket()
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(serve_http, asgi, bind=bind, shutdown_trigger=stop.wait))
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=base) as client:
                yield Served(system, backend, asgi.state.server, client, base_url=base)
            stop.set()


async def in_thread(fn: Callable[[], Any]) -> Any:
    """Run a blocking client call (the openai client) in a worker thread."""
    return await anyio.to_thread.run_sync(fn)


async def wait_until(check: Callable[[], bool]) -> None:
    """Poll ``check`` until it holds (callers bound the wait with ``fail_after``). For
    states a worker thread or a socket changes, which no event of ours announces."""
    while not check():  # noqa: ASYNC110
        await anyio.sleep(0.01)


HERMES_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nYou may call functions.\n<tools>"
    "{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}\n</tools>\n"
    "Return each call as <tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant"
    "{%- if message.content %}\n{{ message.content }}{%- endif %}"
    "{%- for call in message.tool_calls %}\n<tool_call>\n"
    '{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}'
    "\n</tool_call>{%- endfor %}<|im_end|>\n"
    "{%- elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n"
    "{{ message.content }}\n</tool_response><|im_end|>\n"
    "{%- else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)
"""A chat template in the shape of Qwen2.5's (tools in ``<tools>``, calls in
``<tool_call>`` tags, results in ``<tool_response>``), for fake models that take tools."""


TEMPERATURE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_temperature",
        "description": "The temperature of a city now, in degrees Celsius",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
"""A function tool the tool-call tests offer (fake and real models)."""
WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "temp_c": {"type": "number"},
        "sunny": {"type": "boolean"},
    },
    "required": ["city", "temp_c", "sunny"],
    "additionalProperties": False,
}
"""A strict schema the structured-output tests ask for."""


async def advance_until(clock: FakeClock, check: Callable[[], bool], step: float = 0.125) -> None:
    """Move ``clock`` forward by hand, ``step`` at a time, until ``check`` holds, letting the
    tasks it wakes run in between (callers bound the wait with ``fail_after``)."""
    while not check():
        clock.advance(step)
        await anyio.sleep(0.02)
