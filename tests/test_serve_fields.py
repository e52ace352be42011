"""Every documented request field is honoured or refused by name, never dropped.

The table is ``swapos.serve.fields.FIELDS``. These tests hold it against the fields the real
``openai`` and ``ollama`` clients can send (a field a new client version adds fails here
until it is given a fate), against the request Structs (an honoured field is decoded; a
decoded field has a fate), and against the server: each field sent with a value that asks
for something gets a 200 when it is honoured or metadata and a 400 naming it when refused.
"""

from __future__ import annotations

import typing
from typing import Any

import anyio
import msgspec
import pytest
from ollama import _types as ollama_types
from openai.types import completion_create_params as text_params
from openai.types.chat import chat_completion_message_param as message_params
from openai.types.chat import completion_create_params as chat_params
from serve_fakes import HERMES_TEMPLATE, in_process

from swapos.backends.fake_script import FakeModelScript
from swapos.models.templates import FimTokens
from swapos.serve.fields import FIELDS, Fate
from swapos.serve.ollama_schemas import ChatRequest, GenerateRequest, Message, Options
from swapos.serve.schemas import ChatCompletionRequest, ChatMessageIn, CompletionRequest
from swapos.testing import FakeClock


def _keys(*typed_dicts: Any) -> set[str]:
    return {k for t in typed_dicts for k in typing.get_type_hints(t)}


CLIENT_FIELDS = {
    "openai.chat": _keys(
        chat_params.CompletionCreateParamsStreaming, chat_params.CompletionCreateParamsNonStreaming
    ),
    "openai.completions": _keys(
        text_params.CompletionCreateParamsStreaming, text_params.CompletionCreateParamsNonStreaming
    ),
    "openai.message": _keys(*typing.get_args(message_params.ChatCompletionMessageParam)),
    "ollama.chat": set(ollama_types.ChatRequest.model_fields),
    "ollama.generate": set(ollama_types.GenerateRequest.model_fields),
    "ollama.options": set(ollama_types.Options.model_fields),
    "ollama.message": set(ollama_types.Message.model_fields),
}
STRUCTS: dict[str, type[msgspec.Struct]] = {
    "openai.chat": ChatCompletionRequest,
    "openai.completions": CompletionRequest,
    "openai.message": ChatMessageIn,
    "ollama.chat": ChatRequest,
    "ollama.generate": GenerateRequest,
    "ollama.options": Options,
    "ollama.message": Message,
}


@pytest.mark.parametrize("api", sorted(CLIENT_FIELDS))
def test_every_field_the_real_client_can_send_has_a_fate(api: str) -> None:
    assert CLIENT_FIELDS[api] - set(FIELDS[api]) == set()


@pytest.mark.parametrize("api", sorted(STRUCTS))
def test_honoured_fields_are_decoded_and_decoded_fields_have_a_fate(api: str) -> None:
    decoded = set(STRUCTS[api].__struct_fields__)
    honoured = {name for name, f in FIELDS[api].items() if f.fate is Fate.HONOURED}
    assert honoured - decoded == set(), "an honoured field the request Struct drops"
    assert decoded - set(FIELDS[api]) == set(), "a decoded field with no fate in the table"


def test_the_fields_that_were_silently_dropped_are_now_handled() -> None:
    chat = FIELDS["openai.chat"]
    assert chat["tools"].fate is Fate.HONOURED
    assert chat["response_format"].fate is Fate.HONOURED
    assert chat["modalities"].fate is Fate.REFUSED and chat["modalities"].allowed == (["text"],)


# --- against the server -------------------------------------------------------------------

TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
HELLO = [{"role": "user", "content": "hi"}]
SAMPLES: dict[str, dict[str, Any]] = {
    "openai.chat": {
        "model": "q", "messages": HELLO, "max_tokens": 3, "temperature": 0.5, "top_p": 0.9,
        "seed": 1, "stop": ["x"], "stream": False, "stream_options": None, "n": 1,
        "user": "u", "presence_penalty": 0.5, "frequency_penalty": 0.5,
        "logit_bias": {"5": 1.0}, "top_k": 5, "min_p": 0.1, "repeat_penalty": 1.1,
        "repeat_last_n": 32, "max_completion_tokens": 3, "tools": [TOOL],
        "tool_choice": "auto", "parallel_tool_calls": False,
        "response_format": {"type": "json_object"},
        "prediction": {"type": "content", "content": "hi"}, "modalities": ["text", "audio"],
        "audio": {"voice": "alloy", "format": "mp3"},
        "functions": [{"name": "f"}], "function_call": "auto", "logprobs": True,
        "top_logprobs": 3, "reasoning_effort": "high", "verbosity": "low",
        "web_search_options": {}, "moderation": {"model": "x"}, "metadata": {"k": "v"},
        "store": True, "service_tier": "auto", "safety_identifier": "s",
        "prompt_cache_key": "k", "prompt_cache_options": {}, "prompt_cache_retention": "24h",
        "continue_final_message": False, "add_generation_prompt": True,
    },
    "openai.completions": {
        "model": "q", "prompt": "hi", "max_tokens": 3, "temperature": 0.5, "top_p": 0.9,
        "seed": 1, "stop": ["x"], "stream": False, "stream_options": None, "n": 1, "user": "u",
        "presence_penalty": 0.5, "frequency_penalty": 0.5, "logit_bias": {"5": 1.0},
        "top_k": 5, "min_p": 0.1, "repeat_penalty": 1.1, "repeat_last_n": 32,
        "suffix": "end", "echo": True, "best_of": 3, "logprobs": 2,
    },
    "ollama.chat": {
        "model": "q", "messages": HELLO, "tools": [TOOL], "format": "json",
        "options": {"temperature": 0.5}, "stream": False, "keep_alive": "5m", "think": True,
        "logprobs": True, "top_logprobs": 3,
    },
    "ollama.generate": {
        "model": "q", "prompt": "hi", "suffix": "end", "system": "s", "raw": False,
        "format": "json", "options": {"temperature": 0.5}, "stream": False,
        "keep_alive": "5m", "images": ["AA=="], "template": "{{ .Prompt }}",
        "context": [1, 2], "think": True, "logprobs": True, "top_logprobs": 3, "width": 64,
        "height": 64, "steps": 4,
    },
    "ollama.options": {
        "num_predict": 3, "temperature": 0.5, "top_p": 0.9, "top_k": 5, "min_p": 0.1,
        "seed": 1, "stop": ["x"], "repeat_penalty": 1.1, "repeat_last_n": 32,
        "presence_penalty": 0.5, "frequency_penalty": 0.5, "num_ctx": 1024, "typical_p": 0.5,
        "tfs_z": 0.5, "mirostat": 2, "mirostat_tau": 3.0, "mirostat_eta": 0.5,
        "penalize_newline": False, "num_keep": 4, "num_batch": 8, "num_gpu": 1,
        "main_gpu": 1, "low_vram": True, "f16_kv": True, "logits_all": True,
        "vocab_only": True, "use_mmap": False, "use_mlock": True, "embedding_only": True,
        "numa": True, "num_thread": 2,
    },
    "openai.message": {
        "role": "user", "content": "hi", "name": "n", "tool_calls": None,
        "tool_call_id": None, "refusal": "no", "audio": {"id": "a"},
        "function_call": {"name": "f", "arguments": "{}"},
    },
    "ollama.message": {
        "role": "user", "content": "hi", "tool_calls": None, "tool_name": "f",
        "images": ["AA=="], "thinking": "hmm",
    },
}  # fmt: skip
ROUTES = {
    "openai.chat": "/v1/chat/completions",
    "openai.completions": "/v1/completions",
    "ollama.chat": "/api/chat",
    "ollama.generate": "/api/generate",
}
BASE: dict[str, dict[str, Any]] = {
    "openai.chat": {"model": "q", "messages": HELLO},
    "openai.completions": {"model": "q", "prompt": "hi"},
    "ollama.chat": {"model": "q", "messages": HELLO, "stream": False},
    "ollama.generate": {"model": "q", "prompt": "hi", "stream": False},
}


def _cases() -> list[tuple[str, str]]:
    return [(api, name) for api in SAMPLES for name in FIELDS[api]]


def _request(api: str, name: str) -> tuple[str, dict[str, Any], str]:
    """(route, body, the field's path in errors) sending ``name`` with its sample value."""
    value = SAMPLES[api][name]
    if api == "ollama.options":
        return (
            ROUTES["ollama.chat"],
            {**BASE["ollama.chat"], "options": {name: value}},
            (f"options.{name}"),
        )
    if api in ("openai.message", "ollama.message"):
        route_api = "openai.chat" if api == "openai.message" else "ollama.chat"
        turn = {"role": "user", "content": "hi", name: value}
        return ROUTES[route_api], {**BASE[route_api], "messages": [turn]}, f"messages[0].{name}"
    return ROUTES[api], {**BASE[api], name: value}, name


def test_every_field_has_a_sample() -> None:
    for api, table in FIELDS.items():
        assert set(table) <= set(SAMPLES[api]), api


SCRIPTS = {
    "q": FakeModelScript(
        reply="{}",
        chat_template=HERMES_TEMPLATE,
        load_s=0.1,
        token_s=0.01,
        fim=FimTokens(prefix="<P>", suffix="<S>", middle="<M>"),
    )
}


@pytest.mark.parametrize(("api", "name"), _cases(), ids=[f"{a}:{n}" for a, n in _cases()])
async def test_each_field_is_honoured_or_refused_by_name(api: str, name: str) -> None:
    route, body, path = _request(api, name)
    fate = FIELDS[api][name].fate
    clock = FakeClock()
    with anyio.fail_after(60):
        async with clock.autojump(), in_process(SCRIPTS, budget=1000, clock=clock) as s:
            r = await s.client.post(route, json=body)
    if fate is Fate.REFUSED:
        assert r.status_code == 400, r.text
        message = r.json()["error"]
        message = message["message"] if isinstance(message, dict) else message
        assert message.startswith(f"{path} is not supported"), message
    else:
        assert r.status_code == 200, r.text
