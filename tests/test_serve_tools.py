"""Tool calls and structured output through ``swapos serve`` with the real ``openai`` and
``ollama`` clients, on the fake backend (Hypercorn on the test's loop, asyncio and trio).

The fake model's chat template is shaped like Qwen2.5's (``serve_fakes.HERMES_TEMPLATE``):
what the server renders and parses is what it does for the real model; the fake answers a
forced grammar with the grammar's example where its script does not fit.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import jsonschema
import ollama
import openai
from serve_fakes import (
    HERMES_TEMPLATE,
    TEMPERATURE_TOOL,
    WEATHER_SCHEMA,
    Served,
    in_thread,
    over_http,
)

from swapos.backends.fake_script import FakeModelScript
from swapos.models.templates import FimTokens
from swapos.testing import FakeClock

CALL = '<tool_call>\n{"name": "get_temperature", "arguments": {"city": "Paris"}}\n</tool_call>'
TOOLS: list[dict[str, Any]] = [
    TEMPERATURE_TOOL,
    {
        "type": "function",
        "function": {
            "name": "convert",
            "description": "Convert a temperature from Celsius to Fahrenheit",
            "parameters": {
                "type": "object",
                "properties": {"celsius": {"type": "number"}},
                "required": ["celsius"],
            },
        },
    },
]
ASK = [{"role": "user", "content": "How warm is it in Paris?"}]


def scripts(*replies: str) -> dict[str, FakeModelScript]:
    return {
        "q": FakeModelScript(
            replies=replies, chat_template=HERMES_TEMPLATE, load_s=1.0, token_s=0.1
        )
    }


def client(s: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=s.base_url + "/v1", api_key="none", max_retries=0, timeout=30)


async def test_a_tool_call_comes_back_as_tool_calls_whole_and_streamed() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(scripts(CALL), budget=100, clock=clock) as s:

            def whole() -> Any:
                with client(s) as c:
                    return c.chat.completions.create(model="q", messages=ASK, tools=TOOLS)

            r = await in_thread(whole)
            choice = r.choices[0]
            assert choice.finish_reason == "tool_calls"
            assert choice.message.content is None
            (call,) = choice.message.tool_calls
            assert call.type == "function" and call.id.startswith("call")
            assert call.function.name == "get_temperature"
            assert json.loads(call.function.arguments) == {"city": "Paris"}
            prompt = s.backend.prompts[-1][1]
            assert "<tools>" in prompt and '"name": "get_temperature"' in prompt

            def streamed() -> list[Any]:
                with (
                    client(s) as c,
                    c.chat.completions.create(
                        model="q", messages=ASK, tools=TOOLS, stream=True
                    ) as events,
                ):
                    return list(events)

            chunks = await in_thread(streamed)
            deltas = [c.choices[0].delta for c in chunks if c.choices]
            assert not "".join(d.content or "" for d in deltas)  # no call text leaks as text
            parts = [t for d in deltas for t in d.tool_calls or []]
            assert parts[0].function.name == "get_temperature" and parts[0].id
            args = "".join(p.function.arguments or "" for p in parts)
            assert json.loads(args) == {"city": "Paris"}
            assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_a_tool_result_round_trip_reaches_the_template_and_the_answer_is_text() -> None:
    clock = FakeClock()
    answer = "It is 21 degrees in Paris."
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(scripts(CALL, answer), budget=100, clock=clock) as s:

            def round_trip() -> Any:
                with client(s) as c:
                    first = c.chat.completions.create(model="q", messages=ASK, tools=TOOLS)
                    call = first.choices[0].message.tool_calls[0]
                    history = [
                        *ASK,
                        first.choices[0].message.model_dump(exclude_none=True),
                        {"role": "tool", "tool_call_id": call.id, "content": "21"},
                    ]
                    return c.chat.completions.create(model="q", messages=history, tools=TOOLS)

            r = await in_thread(round_trip)
            assert r.choices[0].message.content == answer
            assert r.choices[0].finish_reason == "stop"
            assert not r.choices[0].message.tool_calls
            prompt = s.backend.prompts[-1][1]
            assert "<tool_response>\n21\n</tool_response>" in prompt
            assert '<tool_call>\n{"name": "get_temperature", "arguments": {"city": "Paris"}}' in (
                prompt
            )


async def test_a_named_tool_choice_forces_a_call_of_that_function() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            over_http(scripts("I would rather chat."), budget=100, clock=clock) as s,
        ):

            def named() -> Any:
                with client(s) as c:
                    return c.chat.completions.create(
                        model="q",
                        messages=ASK,
                        tools=TOOLS,
                        tool_choice={"type": "function", "function": {"name": "convert"}},
                    )

            r = await in_thread(named)
            (call,) = r.choices[0].message.tool_calls
            assert call.function.name == "convert"
            assert json.loads(call.function.arguments) == {"celsius": 0}
            grammar = s.backend.params[-1][1].constraint
            assert grammar is not None and not grammar.lazy
            assert '"\\"convert\\""' in grammar.gbnf and "get_temperature" not in grammar.gbnf


async def test_tool_choice_none_offers_no_tools_and_auto_leaves_text_alone() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            over_http(scripts("plain words"), budget=100, clock=clock) as s,
        ):

            def ask(choice: str) -> Any:
                with client(s) as c:
                    return c.chat.completions.create(
                        model="q", messages=ASK, tools=TOOLS, tool_choice=choice
                    )

            r = await in_thread(lambda: ask("none"))
            assert r.choices[0].message.content == "plain words"
            assert "<tools>" not in s.backend.prompts[-1][1]
            assert s.backend.params[-1][1].constraint is None
            r = await in_thread(lambda: ask("auto"))
            assert r.choices[0].message.content == "plain words"
            assert r.choices[0].finish_reason == "stop"
            assert s.backend.params[-1][1].constraint.lazy  # type: ignore[union-attr]


async def test_response_format_json_schema_strict_parses_and_validates() -> None:
    clock = FakeClock()
    fits = '{"city": "Paris", "temp_c": 21.5, "sunny": true}'
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            over_http(scripts("prose", fits), budget=100, clock=clock) as s,
        ):
            fmt = {
                "type": "json_schema",
                "json_schema": {"name": "weather", "schema": WEATHER_SCHEMA, "strict": True},
            }

            def ask() -> Any:
                with client(s) as c:
                    return c.chat.completions.create(model="q", messages=ASK, response_format=fmt)

            for expected in ({"city": "", "temp_c": 0, "sunny": False}, json.loads(fits)):
                r = await in_thread(ask)
                value = json.loads(r.choices[0].message.content)
                jsonschema.validate(value, WEATHER_SCHEMA)
                assert value == expected
            assert "temp-c-kv" in s.backend.params[-1][1].constraint.gbnf  # type: ignore[union-attr]


async def test_the_ollama_client_gets_tool_calls_and_a_format_schema() -> None:
    clock = FakeClock()
    fits = '{"city": "Paris", "temp_c": 21.5, "sunny": true}'
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(scripts(CALL, fits), budget=100, clock=clock) as s:

            def ask() -> tuple[Any, Any]:
                with ollama.Client(host=s.base_url, timeout=30) as c:
                    called = c.chat(model="q", messages=ASK, tools=TOOLS)
                    formatted = c.chat(model="q", messages=ASK, format=WEATHER_SCHEMA)
                    return called, formatted

            called, formatted = await in_thread(ask)
            (call,) = called.message.tool_calls
            assert call.function.name == "get_temperature"
            assert dict(call.function.arguments) == {"city": "Paris"}
            jsonschema.validate(json.loads(formatted.message.content), WEATHER_SCHEMA)


async def test_api_show_lists_tools_and_insert_where_the_model_can() -> None:
    clock = FakeClock()
    fim = FimTokens(prefix="<P>", suffix="<S>", middle="<M>")
    models = {
        **scripts("x"),
        "plain": FakeModelScript(reply="x"),
        "coder": FakeModelScript(reply="x", fim=fim),
    }
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(models, budget=300, clock=clock) as s:
            found = {}
            for name in models:
                r = await s.client.post("/api/show", json={"model": name})
                found[name] = r.json()["capabilities"]
    assert found == {
        "q": ["completion", "tools"],
        "plain": ["completion"],
        "coder": ["completion", "insert"],
    }
