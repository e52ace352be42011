"""The Ollama request and response shapes ``swapos serve`` speaks under ``/api/``.

The subset Ollama's clients use (its ``docs/api.md``): chat, generate, tags, ps, show,
version. Requests are decoded with msgspec; which documented fields are honoured or
refused is :mod:`swapos.serve.fields`' table, checked first (refused with Ollama's 400).
Durations in responses are nanoseconds.
"""

from __future__ import annotations

from typing import Any

import msgspec

from swapos.serve.schemas import Tool

# --- requests -----------------------------------------------------------------------------


class Options(msgspec.Struct, frozen=True, kw_only=True):
    """``options``: the sampling parameters SwapOS honours, and ``num_ctx`` (the context the
    model is loaded with for the request, grown up to its cap). Load settings are refused
    (:mod:`swapos.serve.fields`)."""

    num_predict: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    repeat_penalty: float | None = None
    repeat_last_n: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    num_ctx: int | None = None


class CallFunction(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call's function in Ollama's shape: ``arguments`` is an object."""

    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)


class OllamaToolCall(msgspec.Struct, frozen=True, kw_only=True):
    function: CallFunction


class Message(msgspec.Struct, frozen=True, kw_only=True):
    role: str
    content: str | None = None
    tool_calls: list[OllamaToolCall] | None = None
    tool_name: str | None = None


KeepAliveValue = float | str | None


class ChatRequest(msgspec.Struct, frozen=True, kw_only=True):
    """``POST /api/chat``. Empty ``messages`` loads the model (with ``keep_alive`` 0: unloads
    it)."""

    model: str = ""
    messages: list[Message] = msgspec.field(default_factory=list)
    stream: bool = True
    options: Options | None = None
    keep_alive: KeepAliveValue = None
    format: Any = None
    tools: list[Tool] | None = None


class GenerateRequest(msgspec.Struct, frozen=True, kw_only=True):
    """``POST /api/generate``. An empty ``prompt`` loads the model (with ``keep_alive`` 0:
    unloads it)."""

    model: str = ""
    prompt: str = ""
    system: str | None = None
    raw: bool = False
    stream: bool = True
    options: Options | None = None
    keep_alive: KeepAliveValue = None
    suffix: str | None = None
    format: Any = None


class ShowRequest(msgspec.Struct, frozen=True, kw_only=True):
    """``POST /api/show`` (``name`` is the older spelling of ``model``)."""

    model: str = ""
    name: str = ""
    verbose: bool = False


# --- responses ----------------------------------------------------------------------------


class OutMessage(msgspec.Struct, frozen=True, kw_only=True):
    role: str = "assistant"
    content: str = ""
    tool_calls: list[OllamaToolCall] | msgspec.UnsetType = msgspec.UNSET


class Stats(msgspec.Struct, frozen=True, kw_only=True):
    """The numbers of a finished request (nanoseconds; docs/serve.md defines each)."""

    total_duration: int
    load_duration: int
    prompt_eval_count: int
    prompt_eval_duration: int
    eval_count: int
    eval_duration: int


class ChatChunk(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One line of a streamed chat, or the whole answer (``done`` true, with the stats)."""

    model: str
    created_at: str
    message: OutMessage
    done: bool
    done_reason: str | None = None
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None
    prompt_eval_duration: int | None = None
    eval_count: int | None = None
    eval_duration: int | None = None
    swapos: Any = None


class GenerateChunk(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One line of a streamed generation, or the whole answer."""

    model: str
    created_at: str
    response: str
    done: bool
    done_reason: str | None = None
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None
    prompt_eval_duration: int | None = None
    eval_count: int | None = None
    eval_duration: int | None = None
    swapos: Any = None


class Details(msgspec.Struct, frozen=True, kw_only=True):
    parent_model: str = ""
    format: str = "gguf"
    family: str = ""
    families: list[str] | None = None
    parameter_size: str = ""
    quantization_level: str = ""


class TagModel(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    model: str
    modified_at: str
    size: int
    digest: str
    details: Details


class Tags(msgspec.Struct, frozen=True, kw_only=True):
    models: list[TagModel]


class RunningModel(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    model: str
    size: int
    digest: str
    details: Details
    expires_at: str
    size_vram: int = 0
    context_length: int = 0
    swapos: Any = None


class Running(msgspec.Struct, frozen=True, kw_only=True):
    models: list[RunningModel]


class Show(msgspec.Struct, frozen=True, kw_only=True):
    modelfile: str
    parameters: str
    template: str
    details: Details
    model_info: dict[str, Any]
    capabilities: list[str]
    modified_at: str
