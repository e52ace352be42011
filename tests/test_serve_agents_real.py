"""Agent clients against ``swapos serve`` on the real Qwen2.5-Coder models: tool calls and
structured output with the real ``openai`` and ``ollama`` clients on the 1.5B, an agent of
the OpenAI Agents SDK that needs two tool calls in sequence, and fill-in-the-middle on the
0.5B. The server runs in process (Hypercorn on loopback, asyncio and trio); the clients run
in worker threads. Generations are greedy, so each answer is the model's own, every time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar

import anyio
import jsonschema
import ollama
import openai
import pytest
from serve_fakes import TEMPERATURE_TOOL, WEATHER_SCHEMA

from swapos.actors.system import open_system
from swapos.models.profile import ModelConfig, Profile
from swapos.serve import app
from swapos.serve.hosting import listening_socket, serve_http

pytestmark = [pytest.mark.real_model, pytest.mark.slow]
T = TypeVar("T")

LARGE = "qwen2.5-coder-1.5b-instruct-q4_k_m"
SMALL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
TEMPERATURE = TEMPERATURE_TOOL
CONVERT = {
    "type": "function",
    "function": {
        "name": "celsius_to_fahrenheit",
        "description": "Convert degrees Celsius to degrees Fahrenheit",
        "parameters": {
            "type": "object",
            "properties": {"celsius": {"type": "number"}},
            "required": ["celsius"],
        },
    },
}
INSTRUCTIONS = (
    "You answer questions about the weather. Call a tool only when you need a number you "
    "do not have yet; once you have the answer, reply to the user in one sentence without "
    "calling a tool."
)
ASK = [
    {"role": "system", "content": INSTRUCTIONS},
    {"role": "user", "content": "What is the temperature in Paris right now?"},
]
WEATHER = WEATHER_SCHEMA


@asynccontextmanager
async def serving(name: str, bundled: str) -> AsyncIterator[str]:
    """One real model served on a free loopback port; its base URL."""
    profile = Profile(
        name="agents", budget="3GiB", models={name: ModelConfig(bundled=bundled, n_ctx=4096)}
    )
    async with open_system(profile) as system:
        bind, port = listening_socket()
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(serve_http, app(system), bind=bind, shutdown_trigger=stop.wait))
            yield f"http://127.0.0.1:{port}"
            stop.set()


async def in_thread(fn: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(fn)


def _client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=600)


async def test_the_real_15b_calls_tools_and_answers_json_through_the_openai_client() -> None:
    with anyio.fail_after(900):
        async with serving("large", LARGE) as base:

            def calls() -> dict[str, Any]:
                out: dict[str, Any] = {}
                with _client(base) as c:
                    ask = partial(c.chat.completions.create, model="large", temperature=0)
                    out["whole"] = ask(messages=ASK, tools=[TEMPERATURE, CONVERT])
                    with ask(messages=ASK, tools=[TEMPERATURE, CONVERT], stream=True) as s:
                        out["streamed"] = list(s)
                    call = out["whole"].choices[0].message.tool_calls[0]
                    history = [
                        *ASK,
                        out["whole"].choices[0].message.model_dump(exclude_none=True),
                        {"role": "tool", "tool_call_id": call.id, "content": "21 degrees Celsius"},
                    ]
                    out["round_trip"] = ask(messages=history, tools=[TEMPERATURE])
                    out["named"] = ask(
                        messages=[{"role": "user", "content": "Convert 100 degrees Celsius."}],
                        tools=[TEMPERATURE, CONVERT],
                        tool_choice={
                            "type": "function",
                            "function": {"name": CONVERT["function"]["name"]},
                        },  # type: ignore[index]
                    )
                    out["json"] = ask(
                        messages=[{"role": "user", "content": "Describe the weather in Paris."}],
                        response_format={
                            "type": "json_schema",
                            "json_schema": {"name": "weather", "schema": WEATHER, "strict": True},
                        },
                        max_tokens=100,
                    )
                return out

            out = await in_thread(calls)
    whole = out["whole"].choices[0]
    assert whole.finish_reason == "tool_calls"
    (call,) = whole.message.tool_calls
    assert call.function.name == "get_temperature"
    assert json.loads(call.function.arguments) == {"city": "Paris"}

    parts = [t for c in out["streamed"] if c.choices for t in c.choices[0].delta.tool_calls or []]
    assert parts[0].function.name == "get_temperature"
    assert json.loads("".join(p.function.arguments or "" for p in parts)) == {"city": "Paris"}
    assert out["streamed"][-1].choices[0].finish_reason == "tool_calls"

    answer = out["round_trip"].choices[0]
    assert answer.finish_reason == "stop" and not answer.message.tool_calls
    assert "21" in answer.message.content

    (named,) = out["named"].choices[0].message.tool_calls
    assert named.function.name == "celsius_to_fahrenheit"
    assert json.loads(named.function.arguments)["celsius"] == 100

    weather = json.loads(out["json"].choices[0].message.content)
    jsonschema.validate(weather, WEATHER)


async def test_the_real_15b_calls_tools_and_follows_a_format_through_the_ollama_client() -> None:
    with anyio.fail_after(600):
        async with serving("large", LARGE) as base:

            def calls() -> tuple[Any, Any]:
                with ollama.Client(host=base, timeout=600) as c:
                    called = c.chat(
                        model="large", messages=ASK, tools=[TEMPERATURE], options={"seed": 0}
                    )
                    formatted = c.chat(
                        model="large",
                        messages=[{"role": "user", "content": "Describe the weather in Paris."}],
                        format=WEATHER,
                        options={"temperature": 0, "num_predict": 100},
                    )
                    return called, formatted

            called, formatted = await in_thread(calls)
    (call,) = called.message.tool_calls
    assert call.function.name == "get_temperature"
    assert dict(call.function.arguments) == {"city": "Paris"}
    jsonschema.validate(json.loads(formatted.message.content), WEATHER)


def _agent_run(base: str) -> tuple[str, list[tuple[str, Any]]]:
    """An OpenAI Agents SDK agent with two function tools, asked a question that needs the
    first tool's result as the second tool's argument. Returns its final answer and the
    calls it made, in order."""
    import agents

    agents.set_tracing_disabled(True)
    made: list[tuple[str, Any]] = []

    @agents.function_tool
    def get_temperature(city: str) -> str:
        """The temperature of a city now, in degrees Celsius."""
        made.append(("get_temperature", city))
        return "21 degrees Celsius"

    @agents.function_tool
    def celsius_to_fahrenheit(celsius: float) -> str:
        """Convert degrees Celsius to degrees Fahrenheit."""
        made.append(("celsius_to_fahrenheit", celsius))
        return f"{celsius * 9 / 5 + 32:.1f} degrees Fahrenheit"

    async def run() -> str:
        async with openai.AsyncOpenAI(base_url=base + "/v1", api_key="none", max_retries=0) as c:
            agent = agents.Agent(
                name="weather",
                instructions=INSTRUCTIONS,
                tools=[get_temperature, celsius_to_fahrenheit],
                model=agents.OpenAIChatCompletionsModel(model="large", openai_client=c),
                model_settings=agents.ModelSettings(temperature=0),
            )
            question = "What is the temperature in Paris right now, in Fahrenheit?"
            result = await agents.Runner.run(agent, question, max_turns=6)
            return str(result.final_output)

    # the SDK runs on asyncio: its own loop in this worker thread, closed when it ends
    return asyncio.run(run()), made


async def test_an_openai_agents_sdk_agent_completes_a_two_tool_task_on_the_real_15b() -> None:
    with anyio.fail_after(900):
        async with serving("large", LARGE) as base:
            final, made = await in_thread(lambda: _agent_run(base))
    assert made == [("get_temperature", "Paris"), ("celsius_to_fahrenheit", 21)]
    assert "69.8" in final


async def test_the_real_05b_fills_in_a_function_body_between_its_signature_and_return() -> None:
    prefix = 'def mean(values):\n    """The arithmetic mean of a list of numbers."""\n'
    suffix = "\n    return result\n"
    with anyio.fail_after(300):
        async with serving("small", SMALL) as base:

            def fill() -> Any:
                with _client(base) as c:
                    return c.completions.create(
                        model="small", prompt=prefix, suffix=suffix, max_tokens=48, temperature=0
                    )

            r = await in_thread(fill)
    middle = r.choices[0].text
    namespace: dict[str, Any] = {}
    exec(prefix + middle + suffix, namespace)  # the joined function compiles and runs
    assert namespace["mean"]([1, 2, 3, 6]) == 3
