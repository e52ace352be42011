"""The OpenAI request and response shapes ``swapos serve`` speaks, as msgspec Structs.

Requests are decoded with msgspec, so a body of the wrong shape is refused with the field
it got wrong (a 400 in the OpenAI error shape). Which documented fields are honoured, taken
as metadata or refused is :mod:`swapos.serve.fields`' table, checked before a body is
decoded here; these Structs hold the fields that are honoured.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

# --- requests -----------------------------------------------------------------------------


class ContentPart(msgspec.Struct, frozen=True, kw_only=True):
    """One part of a message's content (only text parts are accepted)."""

    type: str
    text: str = ""


class FunctionCall(msgspec.Struct, frozen=True, kw_only=True):
    """A call's function: its name and its arguments as JSON text (OpenAI's shape)."""

    name: str
    arguments: str = "{}"


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call of an assistant message (in a request's history, or an answer)."""

    id: str
    function: FunctionCall
    type: Literal["function"] = "function"


class ChatMessageIn(msgspec.Struct, frozen=True, kw_only=True):
    role: str
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


class FunctionSpec(msgspec.Struct, frozen=True, kw_only=True):
    """``tools[i].function``: a function the model may call."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(msgspec.Struct, frozen=True, kw_only=True):
    type: str
    function: FunctionSpec


class NamedFunction(msgspec.Struct, frozen=True, kw_only=True):
    name: str


class NamedToolChoice(msgspec.Struct, frozen=True, kw_only=True):
    """``tool_choice`` naming the one function the answer must call."""

    function: NamedFunction
    type: str = "function"


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class JsonSchemaFormat(msgspec.Struct, frozen=True, kw_only=True):
    """``response_format.json_schema``."""

    name: str = "response"
    description: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None


class ResponseFormat(msgspec.Struct, frozen=True, kw_only=True):
    """``response_format``: ``text``, ``json_object`` or ``json_schema``."""

    type: str
    json_schema: JsonSchemaFormat | None = None


class StreamOptions(msgspec.Struct, frozen=True, kw_only=True):
    include_usage: bool = False


class Prediction(msgspec.Struct, frozen=True, kw_only=True):
    """OpenAI's predicted output: text most of the answer is expected to repeat (a file
    being rewritten). SwapOS drafts from it (``docs/timings.md``, "Drafting"); the answer
    is the model's, whatever the prediction says."""

    type: str = "content"
    content: str | list[ContentPart] = ""


class ChatCompletionRequest(msgspec.Struct, frozen=True, kw_only=True):
    """``POST /v1/chat/completions``."""

    model: str
    messages: list[ChatMessageIn]
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = 1
    user: str | None = None
    continue_final_message: bool = False
    """vLLM's extension: the model continues the final (assistant) message instead of
    starting a new turn; with it ``add_generation_prompt`` must be false."""
    add_generation_prompt: bool = True
    prediction: Prediction | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool = True
    response_format: ResponseFormat | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    modalities: list[str] | None = None
    top_k: int | None = None
    """llama.cpp's sampling extras (not OpenAI's): each as llama.cpp's server takes it."""
    min_p: float | None = None
    repeat_penalty: float | None = None
    repeat_last_n: int | None = None


class CompletionRequest(msgspec.Struct, frozen=True, kw_only=True):
    """``POST /v1/completions`` (one prompt; the model continues it as a base model)."""

    model: str
    prompt: str | list[str]
    max_tokens: int | None = 16  # OpenAI's default for this endpoint
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = 1
    user: str | None = None
    suffix: str | None = None
    """The text after the gap: a fill-in-the-middle request (models with FIM tokens)."""
    echo: bool = False
    best_of: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    top_k: int | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    repeat_last_n: int | None = None


class UnloadRequest(msgspec.Struct, frozen=True, kw_only=True):
    """``POST /unload``: one model, or every model when ``model`` is absent."""

    model: str | None = None


# --- responses ----------------------------------------------------------------------------


class Timings(msgspec.Struct, frozen=True, kw_only=True):
    """The ``swapos`` object of every response (seconds; docs/serve.md defines each)."""

    queue_wait_s: float
    load_s: float
    load_hidden_s: float
    evict_s: float
    prefill_tokens: int
    kv_restored_tokens: int
    ttft_s: float
    decode_tok_s: float
    predicted_next: str | None = None
    task_id: str = ""
    stop_reason: str = ""
    """Why generation ended, finer than ``finish_reason``: ``eos``, ``stop`` (a stop
    sequence), ``length`` or ``context``."""


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatMessageOut(msgspec.Struct, frozen=True, kw_only=True):
    role: Literal["assistant"] = "assistant"
    content: str | None = ""
    tool_calls: list[ToolCall] | None = None


FinishReason = Literal["stop", "length", "tool_calls"]


class ChatChoice(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    message: ChatMessageOut
    finish_reason: FinishReason
    logprobs: None = None


class TextChoice(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    text: str
    finish_reason: FinishReason | None
    logprobs: None = None


class ChatCompletion(msgspec.Struct, frozen=True, kw_only=True):
    """A whole chat completion: OpenAI's shape plus ``swapos`` and Ollama's counters
    (``load_duration`` in nanoseconds, as Ollama reports it)."""

    id: str
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    swapos: Timings
    load_duration: int
    prompt_eval_count: int
    eval_count: int
    object: Literal["chat.completion"] = "chat.completion"


class TextCompletion(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    created: int
    model: str
    choices: list[TextChoice]
    usage: Usage
    swapos: Timings
    load_duration: int
    prompt_eval_count: int
    eval_count: int
    object: Literal["text_completion"] = "text_completion"


class FunctionDelta(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    name: str | None = None
    arguments: str | None = None


class ToolCallDelta(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A piece of a streamed tool call: the first names it (``id``, ``type``, the
    function's name), later ones add to its ``arguments``; ``index`` says which call."""

    index: int
    function: FunctionDelta
    id: str | None = None
    type: str | None = None


class Delta(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    role: str | None = None
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class ChunkChoice(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    delta: Delta
    finish_reason: FinishReason | None = None
    logprobs: None = None


class ChatCompletionChunk(msgspec.Struct, frozen=True, kw_only=True):
    """One SSE event of a streamed chat completion; the last carries ``usage`` and
    ``swapos`` (and Ollama's counters)."""

    id: str
    created: int
    model: str
    choices: list[ChunkChoice]
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    usage: Usage | None = None
    swapos: Timings | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None
    eval_count: int | None = None


class TextCompletionChunk(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    created: int
    model: str
    choices: list[TextChoice]
    object: Literal["text_completion"] = "text_completion"
    usage: Usage | None = None
    swapos: Timings | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None
    eval_count: int | None = None


class ModelCard(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of ``GET /v1/models``; ``swapos`` tells its residency."""

    id: str
    created: int
    owned_by: str
    swapos: dict[str, Any]
    object: Literal["model"] = "model"


class ModelList(msgspec.Struct, frozen=True, kw_only=True):
    data: list[ModelCard]
    object: Literal["list"] = "list"


class ErrorBody(msgspec.Struct, frozen=True, kw_only=True):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(msgspec.Struct, frozen=True, kw_only=True):
    """The OpenAI error shape: ``{"error": {"message", "type", "param", "code"}}``."""

    error: ErrorBody
