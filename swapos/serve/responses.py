"""From what a request ran to its response: whole, or streamed as server-sent events.

An answer to a request that offered tools is read for calls
(:meth:`~swapos.serve.tools.ToolPlan.parse`): calls come back as ``tool_calls`` with
``finish_reason: "tool_calls"``; streamed, the text before a call goes out as it is
written and each call goes out whole once it is (as OpenAI's ``delta.tool_calls``: one
chunk naming it, one with its arguments).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import msgspec
import structlog

from swapos.messages.base import new_id
from swapos.serve.completions import Kind, Prepared
from swapos.serve.heartbeat import heartbeat, sse_comment
from swapos.serve.running import Ran, failure, run_streamed
from swapos.serve.schemas import (
    ChatChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChatMessageOut,
    ChunkChoice,
    Delta,
    FinishReason,
    FunctionCall,
    FunctionDelta,
    TextChoice,
    TextCompletion,
    TextCompletionChunk,
    Timings,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from swapos.serve.sse import Emit, sse_event
from swapos.serve.state import Server
from swapos.structured.stream import CallStream
from swapos.structured.tools import Parsed, ParsedCall

log = structlog.get_logger(__name__)


def timings(ran: Ran) -> Timings:
    r = ran.record
    return Timings(
        queue_wait_s=ran.queue_wait_s,
        load_s=r.load_s,
        load_hidden_s=r.load_hidden_s,
        evict_s=r.evict_s,
        prefill_tokens=r.prefill_tokens,
        kv_restored_tokens=r.kv_restored_tokens,
        ttft_s=r.ttft_s,
        decode_tok_s=r.tok_s,
        predicted_next=ran.predicted,
        task_id=ran.task_id,
        stop_reason=stop_reason(r.outcome),
    )


def stop_reason(outcome: str) -> str:
    """The phase outcome as docs/serve.md's ``stop_reason`` (``eos``, ``stop``, ``length``,
    ``context``): the phase record says ``cap`` where generation hit ``max_tokens``."""
    return "length" if outcome == "cap" else outcome


def _usage(prep: Prepared, ran: Ran) -> Usage:
    prompt = ran.record.prompt_tokens or prep.prompt_tokens
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=ran.record.tokens,
        total_tokens=prompt + ran.record.tokens,
    )


def _finish(ran: Ran, calls: bool = False) -> FinishReason:
    if calls:
        return "tool_calls"
    return "length" if ran.record.hit_cap else "stop"


def load_ns(ran: Ran) -> int:
    """Ollama's ``load_duration``: the swap this request paid (evictions waited for + the
    paid load), in nanoseconds, as the Ollama routes report it. With it go Ollama's
    ``prompt_eval_count`` (prompt tokens evaluated: not restored from the KV cache) and
    ``eval_count`` (tokens generated)."""
    return round((ran.record.evict_s + ran.record.load_s) * 1e9)


def read_calls(prep: Prepared, text: str) -> Parsed:
    """The answer's text and tool calls (none unless the request offered tools)."""
    if prep.tools is None:
        return Parsed(content=text)
    return _logged(prep, prep.tools.parse(text))


def _logged(prep: Prepared, parsed: Parsed) -> Parsed:
    """``parsed``, its problems logged (a call the model started that could not be read)."""
    if parsed.problems:
        log.info("serve.tool_calls_unread", model=prep.model, problems=list(parsed.problems))
    return parsed


def tool_calls(calls: tuple[ParsedCall, ...]) -> list[ToolCall]:
    """Parsed calls in OpenAI's shape, each with a fresh id."""
    return [
        ToolCall(id=new_id("call"), function=FunctionCall(name=c.name, arguments=c.arguments))
        for c in calls
    ]


def whole_response(prep: Prepared, ran: Ran, response_id: str) -> bytes:
    """The non-streamed response body."""
    created = int(time.time())
    if prep.kind == "chat":
        parsed = read_calls(prep, ran.text)
        calls = tool_calls(parsed.calls) if parsed.calls else None
        message = ChatMessageOut(content=parsed.content or None if calls else parsed.content)
        message = msgspec.structs.replace(message, tool_calls=calls)
        return msgspec.json.encode(
            ChatCompletion(
                id=response_id,
                created=created,
                model=prep.model,
                choices=[
                    ChatChoice(index=0, message=message, finish_reason=_finish(ran, bool(calls)))
                ],
                usage=_usage(prep, ran),
                swapos=timings(ran),
                load_duration=load_ns(ran),
                prompt_eval_count=ran.record.prefill_tokens,
                eval_count=ran.record.tokens,
            )
        )
    return msgspec.json.encode(
        TextCompletion(
            id=response_id,
            created=created,
            model=prep.model,
            choices=[TextChoice(index=0, text=prep.echo + ran.text, finish_reason=_finish(ran))],
            usage=_usage(prep, ran),
            swapos=timings(ran),
            load_duration=load_ns(ran),
            prompt_eval_count=ran.record.prefill_tokens,
            eval_count=ran.record.tokens,
        )
    )


class _Chunks:
    """Builds the events of one streamed response."""

    def __init__(self, prep: Prepared, response_id: str) -> None:
        self.prep = prep
        self.id = response_id
        self.created = int(time.time())

    def _chat(self, delta: Delta, finish: FinishReason | None = None, **last: object) -> bytes:
        chunk = ChatCompletionChunk(
            id=self.id,
            created=self.created,
            model=self.prep.model,
            choices=[ChunkChoice(index=0, delta=delta, finish_reason=finish)],
            **last,  # type: ignore[arg-type]
        )
        return sse_event(msgspec.json.encode(chunk))

    def piece(self, text: str, *, role: bool = False) -> bytes:
        if self.prep.kind == "chat":
            delta = Delta(role="assistant", content=text) if role else Delta(content=text)
            return self._chat(delta)
        return sse_event(
            msgspec.json.encode(
                TextCompletionChunk(
                    id=self.id,
                    created=self.created,
                    model=self.prep.model,
                    choices=[TextChoice(index=0, text=text, finish_reason=None)],
                )
            )
        )

    def calls(self, calls: list[ToolCall]) -> list[bytes]:
        """Each call as two chunks: its id, type and name, then its arguments."""
        events = []
        for i, call in enumerate(calls):
            name = FunctionDelta(name=call.function.name, arguments="")
            head = ToolCallDelta(index=i, id=call.id, type="function", function=name)
            args = ToolCallDelta(index=i, function=FunctionDelta(arguments=call.function.arguments))
            events.append(self._chat(Delta(tool_calls=[head])))
            events.append(self._chat(Delta(tool_calls=[args])))
        return events

    def last(self, ran: Ran, *, calls: bool = False) -> bytes:
        usage, swapos, ns = _usage(self.prep, ran), timings(ran), load_ns(ran)
        prefilled, tokens = ran.record.prefill_tokens, ran.record.tokens
        if self.prep.kind == "chat":
            return self._chat(
                Delta(), _finish(ran, calls), usage=usage, swapos=swapos, load_duration=ns,
                prompt_eval_count=prefilled, eval_count=tokens,
            )  # fmt: skip
        chunk = TextCompletionChunk(
            id=self.id,
            created=self.created,
            model=self.prep.model,
            choices=[TextChoice(index=0, text="", finish_reason=_finish(ran))],
            usage=usage,
            swapos=swapos,
            load_duration=ns,
            prompt_eval_count=prefilled,
            eval_count=tokens,
        )
        return sse_event(msgspec.json.encode(chunk))


def streamer(server: Server, prep: Prepared, response_id: str) -> Callable[[Emit], Awaitable[None]]:
    """The producer of a streamed response: a role chunk (at once, before the request is
    queued), one chunk per decoded piece (tool calls once whole), a last chunk with
    ``finish_reason``, ``usage`` and ``swapos``, then ``[DONE]``; while the stream is
    silent, SSE comments say how the request goes (:mod:`swapos.serve.heartbeat`). A phase
    that fails mid-stream ends with an ``error`` event in the OpenAI error shape."""
    chunks = _Chunks(prep, response_id)

    async def produce(client: Emit) -> None:
        beat = heartbeat(server, client, sse_comment)
        emit = beat.send
        if prep.kind == "chat":
            await emit(chunks.piece("", role=True))
        elif prep.echo:
            await emit(chunks.piece(prep.echo))
        split = CallStream(prep.tools.fmt, prep.tools.offered) if prep.tools else None

        async def each(piece: str) -> None:
            text = split.add(piece) if split is not None else piece
            if text:
                await emit(chunks.piece(text))

        async with beat.beating():
            ran = await run_streamed(server, prep, response_id, each, queued=beat.queued)
        if ran.error is not None:
            await emit(sse_event(failure(ran).body()))
            await emit(sse_event("[DONE]"))
            return
        calls: list[ToolCall] = []
        if split is not None:
            rest, parsed = split.finish()
            _logged(prep, parsed)
            if rest:
                await emit(chunks.piece(rest))
            calls = tool_calls(parsed.calls)
            for event in chunks.calls(calls):
                await emit(event)
        await emit(chunks.last(ran, calls=bool(calls)))
        await emit(sse_event("[DONE]"))

    return produce


def new_response_id(kind: Kind) -> str:
    return new_id("chatcmpl" if kind == "chat" else "cmpl")
