"""Hostile input on the agent surface, through the server on the fake backend: a model that
writes broken, huge, nested or unoffered calls gets a well-formed answer (its words as
text), never a 500; a schema built to blow up the grammar gets a 400 naming the part, and
the server goes on answering other clients; a client that hangs up mid-call frees its
lease."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from serve_fakes import HERMES_TEMPLATE, TEMPERATURE_TOOL, chat, in_process, wait_until

from swapos.backends.fake_script import FakeModelScript
from swapos.testing import FakeClock

BROKEN_CALLS = {
    "malformed": '<tool_call>\n{"name": "get_temperature", "arguments": {"city": }\n</tool_call>',
    "truncated": '<tool_call>\n{"name": "get_temperature", "arguments": {"city": "Par',
    "not offered": '<tool_call>\n{"name": "rm_rf", "arguments": {"path": "/"}}\n</tool_call>',
    "deeply nested": "<tool_call>\n" + "[" * 50_000 + "\n</tool_call>",
    "arguments not an object": '<tool_call>\n{"name": "get_temperature", "arguments": 7}\n'
    "</tool_call>",
}
HUGE = "x" * 3_000_000


def _model(reply: str) -> dict[str, FakeModelScript]:
    return {
        "q": FakeModelScript(reply=reply, chat_template=HERMES_TEMPLATE, load_s=0.1, token_s=0.0)
    }


@pytest.mark.parametrize("case", sorted(BROKEN_CALLS))
@pytest.mark.parametrize("stream", [False, True])
async def test_a_broken_call_comes_back_as_text_never_a_500(case: str, stream: bool) -> None:
    reply = BROKEN_CALLS[case]
    clock = FakeClock()
    body = chat("q", tools=[TEMPERATURE_TOOL], stream=stream, max_tokens=8)
    with anyio.fail_after(120):
        async with clock.autojump(), in_process(_model(reply), budget=100, clock=clock) as s:
            r = await s.client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text[:300]
    if stream:
        events = [ln[6:] for ln in r.text.splitlines() if ln.startswith("data: ")]
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        assert not any(c["choices"][0]["delta"].get("tool_calls") for c in chunks)
        finish = chunks[-1]["choices"][0]["finish_reason"]
    else:
        choice = r.json()["choices"][0]
        text, finish = choice["message"]["content"], choice["finish_reason"]
        assert not choice["message"].get("tool_calls")
    assert finish in ("stop", "length")
    assert text.split()[:1] == reply.split()[:1]  # the model's words, as text


async def test_a_huge_call_comes_back_whole() -> None:
    reply = '<tool_call>\n{"name": "get_temperature", "arguments": {"city": "' + HUGE + '"}}'
    reply += "\n</tool_call>"
    clock = FakeClock()
    body = chat("q", tools=[TEMPERATURE_TOOL])
    with anyio.fail_after(120):
        async with clock.autojump(), in_process(_model(reply), budget=100, clock=clock) as s:
            r = await s.client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200
    (call,) = r.json()["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": HUGE}


@pytest.mark.parametrize(
    ("schema", "part"),
    [
        ({"type": "array", "items": {"type": "string"}, "maxItems": 10**9}, "maxItems"),
        ({"type": "string", "pattern": "^(a{1000}){1000}$"}, "pattern repeats"),
        ({"enum": [f"v{i}" for i in range(100_000)]}, "more than"),
        ({"type": "object", "properties": {f"p{i}": {} for i in range(50_000)}}, "bytes"),
        ({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}, "refers to itself"),
        ({"$defs": {"n": {"anyOf": [{"$ref": "#/$defs/n"}]}}, "$ref": "#/$defs/n"}, "itself"),
        ({"type": "object", "properties": {f"p{i}": {} for i in range(900)}}, "optional"),
    ],
)
async def test_a_grammar_bomb_is_a_400_and_the_server_goes_on(schema: Any, part: str) -> None:
    clock = FakeClock()
    fmt = {"type": "json_schema", "json_schema": {"name": "bomb", "schema": schema}}
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            in_process(_model("{}"), budget=100, clock=clock, settings=None) as s,
        ):
            bomb = await s.client.post(
                "/v1/chat/completions", json=chat("q", response_format=fmt), timeout=60
            )
            ok = await s.client.post("/v1/chat/completions", json=chat("q"))
    assert bomb.status_code == 400, bomb.text[:300]
    error = bomb.json()["error"]
    assert error["param"] == "response_format"
    assert part in error["message"], error["message"][:300]
    assert ok.status_code == 200


async def test_a_client_hanging_up_mid_call_frees_the_lease() -> None:
    clock = FakeClock()  # driven by hand: no token comes unless the test advances time
    call = '<tool_call>\n{"name": "get_temperature", "arguments": {"city": "Paris"}}\n</tool_call>'
    scripts = {
        "q": FakeModelScript(reply=call, chat_template=HERMES_TEMPLATE, load_s=0.0, token_s=1.0)
    }
    body = chat("q", tools=[TEMPERATURE_TOOL], stream=True)
    with anyio.fail_after(60):
        async with in_process(scripts, budget=100, clock=clock) as s:
            async with anyio.create_task_group() as tg:

                async def reader() -> None:
                    async with s.client.stream("POST", "/v1/chat/completions", json=body) as r:
                        async for _ in r.aiter_lines():
                            pass

                tg.start_soon(reader)
                await wait_until(lambda: s.backend.generations.get("q") == 1)
                clock.advance(3.0)  # three words of the call are out: mid-argument
                await anyio.sleep(0.05)
                tg.cancel_scope.cancel()  # the client goes away
            await wait_until(lambda: s.system.statistics()["generator"].cancelled == 1)
            assert [m.leases for m in await s.system.models() if m.model == "q"] == [0]
            assert s.server.scheduler.snapshot()[0].running == 0
