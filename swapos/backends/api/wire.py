"""The OpenAI-compatible wire format, free of I/O: request bodies, streamed chunks, timings.

What is sent: ``POST {base}/chat/completions`` (a chat phase: ``messages``) or
``POST {base}/completions`` (a completion-style phase: ``prompt``), always with
``stream: true`` and ``stream_options.include_usage`` so the server reports its token counts
where it can. What comes back: server-sent events, one ``data: {json}`` line per chunk,
``data: [DONE]`` at the end. Unknown fields are ignored on decode.
"""

from __future__ import annotations

from typing import Any, Final, cast, get_args

import msgspec

from swapos.data.generation import GenerationStats, StopReason
from swapos.data.sampling import SamplingParams
from swapos.models.templates import ChatMessage

DONE: Final = "[DONE]"


class Delta(msgspec.Struct, frozen=True, kw_only=True):
    content: str | None = None


class Choice(msgspec.Struct, frozen=True, kw_only=True):
    delta: Delta | None = None  # chat completions
    text: str | None = None  # completions
    finish_reason: str | None = None

    @property
    def piece(self) -> str:
        """The text this chunk adds."""
        if self.delta is not None:
            return self.delta.content or ""
        return self.text or ""


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ServerTimings(msgspec.Struct, frozen=True, kw_only=True):
    """What of ``swapos serve``'s ``swapos`` object a client uses."""

    stop_reason: str = ""


class Chunk(msgspec.Struct, frozen=True, kw_only=True):
    """One streamed ``chat.completion.chunk`` or ``text_completion`` chunk (``swapos``: the
    timings ``swapos serve`` adds to its last chunk)."""

    choices: list[Choice] = msgspec.field(default_factory=list)
    usage: Usage | None = None
    swapos: ServerTimings | None = None


class ErrorBody(msgspec.Struct, frozen=True, kw_only=True):
    message: str = ""


class ErrorReply(msgspec.Struct, frozen=True, kw_only=True):
    """The OpenAI error shape, ``{"error": {"message": ...}}``."""

    error: ErrorBody | str | None = None
    detail: Any = None  # FastAPI-style servers


class ModelEntry(msgspec.Struct, frozen=True, kw_only=True):
    id: str


class ModelList(msgspec.Struct, frozen=True, kw_only=True):
    """``GET /models``: ``{"data": [{"id": ...}, ...]}``."""

    data: list[ModelEntry] = msgspec.field(default_factory=list)


_CHUNK = msgspec.json.Decoder(Chunk)


def request_body(
    model: str,
    params: SamplingParams,
    *,
    messages: list[ChatMessage] | None,
    prompt: str = "",
    continue_final: bool = False,
) -> dict[str, Any]:
    """The JSON body of a streamed completion: a chat when ``messages`` is given, whose final
    assistant message the server continues with ``continue_final`` (vLLM's
    ``continue_final_message``, which ``swapos serve`` takes too)."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": params.max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "seed": params.seed,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if params.stop:
        body["stop"] = list(params.stop)
    if messages is not None:
        body["messages"] = [{"role": m.role, "content": m.content} for m in messages]
        if continue_final:
            body["continue_final_message"] = True
            body["add_generation_prompt"] = False
    else:
        body["prompt"] = prompt
    return body


def sse_data(line: str) -> str | None:
    """The payload of a ``data:`` line of a server-sent event stream (None for any other
    line: comments, ``event:``, blank separators)."""
    if not line.startswith("data:"):
        return None
    return line[5:].strip()


def decode_chunk(data: str) -> Chunk:
    """A streamed chunk.

    Raises:
        msgspec.DecodeError: not a chunk (malformed JSON or wrong types).
    """
    return _CHUNK.decode(data)


def error_message(body: bytes) -> str:
    """What an error response says: the OpenAI shape's message, FastAPI's ``detail``, or
    the body's text (cut to 300 characters)."""
    try:
        reply = msgspec.json.decode(body, type=ErrorReply)
    except msgspec.DecodeError:
        reply = ErrorReply()
    if isinstance(reply.error, ErrorBody) and reply.error.message:
        return reply.error.message
    if isinstance(reply.error, str) and reply.error:
        return reply.error
    if reply.detail:
        return str(reply.detail)
    return body.decode(errors="replace").strip()[:300] or "(empty body)"


def stop_reason(finish_reason: str | None, exact: str = "") -> StopReason:
    """OpenAI's ``finish_reason`` as ours: ``length`` is the token cap; ``stop`` (an
    end-of-generation token or a stop sequence: the API does not say which) and anything
    else is ``stop`` — unless the server said exactly (``exact``: ``swapos serve``'s
    ``stop_reason``)."""
    if exact in _EXACT:
        return cast("StopReason", exact)
    return "length" if finish_reason == "length" else "stop"


_EXACT: Final = frozenset(get_args(StopReason))


class StreamTally:
    """What a streamed generation produced, chunk by chunk, with its timings.

    Times are seconds since the request was sent (``now`` below is the caller's clock
    minus the request's start). Token counts are the server's ``usage`` when it reports
    one; otherwise the generated count is the number of chunks that carried text (one
    token each, as llama.cpp servers stream) and the prompt count is 0: unknown.
    """

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.first_s: float | None = None
        self.last_s = 0.0
        self.finish_reason: str | None = None
        self.exact_reason: str = ""
        self.usage: Usage | None = None

    def add(self, chunk: Chunk, now_s: float) -> str:
        """Fold ``chunk`` in at ``now_s``; returns the text it added ("" for none)."""
        if chunk.usage is not None:
            self.usage = chunk.usage
        if chunk.swapos is not None:
            self.exact_reason = chunk.swapos.stop_reason
        text = ""
        for choice in chunk.choices[:1]:
            text = choice.piece
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason
        if text:
            self.pieces.append(text)
            if self.first_s is None:
                self.first_s = now_s
            self.last_s = now_s
        return text

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def stats(self, end_s: float) -> GenerationStats:
        """The generation's numbers, the stream having ended at ``end_s``.

        ``ttft_s`` (and ``prefill_s``, the same figure: the server's queueing and prefill
        are not visible apart) runs from sending the request to the first text; ``gen_s``
        from the first text to the last. Nothing is restored from a local KV state.
        """
        usage = self.usage
        tokens = usage.completion_tokens if usage and usage.completion_tokens else len(self.pieces)
        prompt_tokens = usage.prompt_tokens if usage else 0
        ttft = self.first_s if self.first_s is not None else end_s
        return GenerationStats(
            prompt_tokens=prompt_tokens,
            prefill_tokens=prompt_tokens,
            kv_restored_tokens=0,
            prefill_s=ttft,
            ttft_s=ttft,
            tokens=tokens,
            gen_s=max(0.0, self.last_s - ttft) if self.first_s is not None else 0.0,
            stop_reason=stop_reason(self.finish_reason, self.exact_reason),
        )
