"""Ollama's requests as the OpenAI routes' requests, and their calls back in Ollama's shape.

An Ollama request runs exactly as its OpenAI twin does (:mod:`swapos.serve.ollama`); these
pure functions translate: ``options`` to the sampling fields, ``format`` (``"json"`` or a
JSON schema) to ``response_format``, messages with ``tool_calls`` (arguments as objects)
and ``tool`` turns (``tool_name``) to OpenAI's messages (arguments as JSON text), and an
answer's calls back to Ollama's ``message.tool_calls``.
"""

from __future__ import annotations

import json
from typing import Any

from swapos.serve.errors import RequestError
from swapos.serve.ollama_schemas import (
    CallFunction,
    ChatRequest,
    Message,
    OllamaToolCall,
    Options,
)
from swapos.serve.schemas import (
    ChatCompletionRequest,
    ChatMessageIn,
    FunctionCall,
    JsonSchemaFormat,
    ResponseFormat,
    ToolCall,
)
from swapos.structured.tools import ParsedCall


def sampling_fields(options: Options, max_tokens: int | None) -> dict[str, Any]:
    """``options`` as the sampling fields of an OpenAI request."""
    return {
        "max_tokens": max_tokens,
        "temperature": options.temperature,
        "top_p": options.top_p,
        "top_k": options.top_k,
        "min_p": options.min_p,
        "seed": options.seed,
        "stop": options.stop,
        "repeat_penalty": options.repeat_penalty,
        "repeat_last_n": options.repeat_last_n,
        "presence_penalty": options.presence_penalty,
        "frequency_penalty": options.frequency_penalty,
    }


def response_format(fmt: Any) -> ResponseFormat | None:
    """Ollama's ``format``: ``"json"`` (any JSON object), a JSON schema, or none.

    Raises:
        RequestError: any other value (a 400 naming ``format``).
    """
    if fmt in (None, ""):
        return None
    if fmt == "json":
        return ResponseFormat(type="json_object")
    if isinstance(fmt, dict):
        return ResponseFormat(
            type="json_schema", json_schema=JsonSchemaFormat(name="format", schema=fmt)
        )
    raise RequestError(400, 'format must be "json" or a JSON schema object', "format")


def messages(turns: list[Message]) -> list[ChatMessageIn]:
    """Ollama's messages as OpenAI's (each call with an id its tool turn can answer)."""
    out = []
    for i, m in enumerate(turns):
        calls = None
        if m.tool_calls:
            calls = [
                ToolCall(
                    id=f"call_{i}_{j}",
                    function=FunctionCall(
                        name=c.function.name, arguments=json.dumps(c.function.arguments)
                    ),
                )
                for j, c in enumerate(m.tool_calls)
            ]
        out.append(
            ChatMessageIn(role=m.role, content=m.content or "", tool_calls=calls, name=m.tool_name)
        )
    return out


def chat_request(body: ChatRequest, model: str, max_tokens: int | None) -> ChatCompletionRequest:
    """``body`` as the OpenAI chat request it runs as (on ``model``, the profile's name).

    Raises:
        RequestError: an unusable ``format`` (400).
    """
    return ChatCompletionRequest(
        model=model,
        messages=messages(body.messages),
        tools=body.tools,
        response_format=response_format(body.format),
        **sampling_fields(body.options or Options(), max_tokens),
    )


def ollama_calls(calls: tuple[ParsedCall, ...]) -> list[OllamaToolCall]:
    """Parsed calls in Ollama's shape (arguments as an object)."""
    return [
        OllamaToolCall(function=CallFunction(name=c.name, arguments=json.loads(c.arguments)))
        for c in calls
    ]
