"""``/v1/chat/completions`` and ``/v1/completions``: from a decoded body to a phase and back.

A request is checked and rendered (:func:`prepare_chat`, :func:`prepare_text`), waits for
its model's turn in the :class:`~swapos.serve.scheduler.Scheduler`, and runs as one phase
of its own task in the event log (:meth:`System.generate
<swapos.actors.system.System.generate>`), with the queued and predicted models as the
schedule after it. The response carries the phase's numbers in ``swapos``.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import anyio
import anyio.to_thread
import msgspec

from swapos.actors.system import PhasesOutcome
from swapos.data.sampling import SamplingParams
from swapos.messages.base import new_id
from swapos.messages.commands import PhaseSpec
from swapos.models.templates import CHATML, ChatFormat, ChatMessage, TemplateError, render_chat
from swapos.records.schema import PhaseRecord
from swapos.serve.errors import RequestError
from swapos.serve.schemas import (
    ChatChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatMessageIn,
    ChatMessageOut,
    ChunkChoice,
    CompletionRequest,
    Delta,
    FinishReason,
    TextChoice,
    TextCompletion,
    TextCompletionChunk,
    Timings,
    Usage,
)
from swapos.serve.sse import Emit, sse_event
from swapos.serve.state import Server

Kind = Literal["chat", "text"]
INLINE_COUNT_CHARS = 16_384
"""Prompts up to this long are counted on the event loop (well under a millisecond)."""
ROLES: dict[str, Literal["system", "user", "assistant"]] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
}


@dataclass(frozen=True)
class Prepared:
    """A checked request, ready to run."""

    kind: Kind
    model: str
    prompt: str
    stable_prefix: str
    special: bool
    params: SamplingParams
    prompt_tokens: int
    key: str | None
    stream: bool


@dataclass(frozen=True)
class Ran:
    """What running a request produced."""

    task_id: str
    record: PhaseRecord
    text: str
    error: str | None
    queue_wait_s: float
    predicted: str | None


# --- preparing ----------------------------------------------------------------------------


def _check_model(server: Server, model: str) -> None:
    if model not in server.system.specs:
        known = ", ".join(sorted(server.system.specs))
        raise RequestError(
            404,
            f"The model {model!r} does not exist; this server's models are: {known}",
            param="model",
            code="model_not_found",
        )


def _messages(messages: list[ChatMessageIn]) -> list[ChatMessage]:
    if not messages:
        raise RequestError(400, "messages must hold at least one message", param="messages")
    out = []
    for i, m in enumerate(messages):
        role = ROLES.get(m.role)
        if role is None:
            raise RequestError(
                400,
                f"messages[{i}].role {m.role!r} is not supported (use one of: {', '.join(ROLES)})",
                param=f"messages[{i}].role",
            )
        content = m.content
        if isinstance(content, list):
            if any(p.type != "text" for p in content):
                raise RequestError(
                    400,
                    f"messages[{i}].content: only text parts are supported",
                    param=f"messages[{i}].content",
                )
            content = "".join(p.text for p in content)
        out.append(ChatMessage(role=role, content=content or ""))
    return out


def _stops(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    return (stop,) if isinstance(stop, str) else tuple(stop)


async def _params_for(
    server: Server,
    model: str,
    prompt: str,
    *,
    max_tokens: int | None,
    temperature: float | None,
    top_p: float | None,
    seed: int | None,
    stop: str | list[str] | None,
    param: str,
) -> tuple[SamplingParams, int]:
    """Sampling parameters and the prompt's token count; a prompt that leaves no room in
    the model's context is refused naming the limit."""
    counter = await server.system.token_counter(model)
    if len(prompt) > INLINE_COUNT_CHARS:  # tokenizing a long text takes a while
        count = await anyio.to_thread.run_sync(counter, prompt)
    else:
        count = counter(prompt)
    n_ctx = server.system.specs[model].n_ctx
    if count >= n_ctx:
        raise RequestError(
            400,
            f"This model's maximum context length is {n_ctx} tokens (n_ctx of {model!r}); "
            f"the prompt has {count} tokens. Shorten the {param} or raise n_ctx in the profile.",
            param=param,
            code="context_length_exceeded",
        )
    if max_tokens is not None and max_tokens < 1:
        raise RequestError(400, f"max_tokens must be at least 1, got {max_tokens}", "max_tokens")
    check_sampling(temperature=temperature, top_p=top_p, seed=seed)
    wanted = max_tokens if max_tokens is not None else server.settings.default_max_tokens
    params = SamplingParams(
        max_tokens=min(wanted, n_ctx - count),
        stop=_stops(stop),
        temperature=temperature if temperature is not None else 0.0,
        seed=seed if seed is not None else 0,
        top_p=top_p if top_p is not None else SamplingParams().top_p,
    )
    return params, count


SEED_MAX = 2**63 - 1


def check_sampling(*, temperature: float | None, top_p: float | None, seed: int | None) -> None:
    """Refuse sampling values no backend can use, with a 400 naming the field (instead of
    a generation failing later as a server error).

    Raises:
        RequestError: ``temperature`` not a finite number >= 0, ``top_p`` not in [0, 1],
            ``seed`` not in [0, 2**63 - 1].
    """
    if temperature is not None and not (math.isfinite(temperature) and temperature >= 0):
        raise RequestError(
            400, f"temperature must be a number >= 0, got {temperature}", "temperature"
        )
    if top_p is not None and not (math.isfinite(top_p) and 0 <= top_p <= 1):
        raise RequestError(400, f"top_p must be between 0 and 1, got {top_p}", "top_p")
    if seed is not None and not 0 <= seed <= SEED_MAX:
        raise RequestError(400, f"seed must be between 0 and {SEED_MAX}, got {seed}", "seed")


async def prepare_chat(server: Server, body: ChatCompletionRequest, key: str | None) -> Prepared:
    """Check a chat request and render its conversation with the model's chat template
    (ChatML as plain text for a model prompted as a base model).

    The stable prefix is the conversation before the last message: the KV cache keeps the
    state after each answer, so the next turn of the same chat re-reads only what is new.
    With ``continue_final_message`` the last message is an assistant turn the model goes
    on writing: the prompt is the conversation before it, the assistant's opening, then its
    text (as the pipeline renders a cue for a local model).

    Raises:
        RequestError: the request cannot be served (its status and message say why).
    """
    if body.n != 1:
        raise RequestError(400, "n must be 1: SwapOS generates one choice", param="n")
    _check_model(server, body.model)
    messages = _messages(body.messages)
    fmt = await server.system.chat_format(body.model)
    special = fmt is not None
    fmt = fmt or ChatFormat(template=CHATML)
    try:
        prompt, stable = _render_conversation(fmt, messages, _continues(body, messages))
    except TemplateError as exc:
        raise RequestError(400, str(exc), param="messages") from exc
    params, count = await _params_for(
        server,
        body.model,
        prompt,
        max_tokens=body.max_completion_tokens or body.max_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        seed=body.seed,
        stop=body.stop,
        param="messages",
    )
    return Prepared(
        kind="chat",
        model=body.model,
        prompt=prompt,
        stable_prefix=stable,
        special=special,
        params=params,
        prompt_tokens=count,
        key=body.user or key,
        stream=body.stream,
    )


def _continues(body: ChatCompletionRequest, messages: list[ChatMessage]) -> bool:
    """Whether the request asks to continue its final message (checked: an assistant turn,
    without a generation prompt)."""
    if not body.continue_final_message:
        if not body.add_generation_prompt:
            raise RequestError(
                400,
                "add_generation_prompt=false is only supported with continue_final_message=true",
                param="add_generation_prompt",
            )
        return False
    if body.add_generation_prompt:
        raise RequestError(
            400,
            "continue_final_message=true needs add_generation_prompt=false",
            param="add_generation_prompt",
        )
    if messages[-1].role != "assistant":
        raise RequestError(
            400,
            "continue_final_message=true needs the last message to be the assistant's",
            param="messages",
        )
    return True


def _render_conversation(
    fmt: ChatFormat, messages: list[ChatMessage], continues: bool
) -> tuple[str, str]:
    """(prompt, stable prefix) of a conversation; with ``continues`` its final assistant
    message is the opening of the answer.

    Raises:
        TemplateError: the template refused the conversation.
    """
    if continues:
        *turns, opened = messages
        prompt = render_chat(fmt, turns) + opened.content
    else:
        turns, prompt = messages, render_chat(fmt, messages)
    before = turns[:-1]
    stable = render_chat(fmt, before, add_generation_prompt=False) if before else ""
    return prompt, stable


async def prepare_text(server: Server, body: CompletionRequest, key: str | None) -> Prepared:
    """Check a completion request: one prompt the model continues as is."""
    if body.n != 1:
        raise RequestError(400, "n must be 1: SwapOS generates one choice", param="n")
    _check_model(server, body.model)
    prompt = body.prompt
    if isinstance(prompt, list):
        if len(prompt) != 1:
            raise RequestError(400, "prompt must be one string", param="prompt")
        prompt = prompt[0]
    params, count = await _params_for(
        server,
        body.model,
        prompt,
        max_tokens=body.max_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        seed=body.seed,
        stop=body.stop,
        param="prompt",
    )
    return Prepared(
        kind="text",
        model=body.model,
        prompt=prompt,
        stable_prefix="",
        special=False,
        params=params,
        prompt_tokens=count,
        key=body.user or key,
        stream=body.stream,
    )


# --- running ------------------------------------------------------------------------------


async def run(
    server: Server, prep: Prepared, task_id: str, on_token: Callable[[str], None] | None = None
) -> Ran:
    """Queue ``prep`` for its model's turn and run it as one phase (task ``task_id``).

    Cancelled (the client went away), the request leaves its queue or stops its generation
    within a token; its turn and lease are released at once and the cancellation propagates.
    """
    server.next_models.arrived(prep.key, prep.model)
    queue_wait = 0.0
    try:
        async with server.scheduler.turn(prep.model) as ticket:
            queue_wait = ticket.queue_wait_s
            queued = server.scheduler.queued_models(exclude=prep.model)
            then = server.next_models.upcoming(prep.key, prep.model, queued)
            outcome: PhasesOutcome = await server.system.generate(
                task_id,
                PhaseSpec(
                    phase=prep.kind,
                    model=prep.model,
                    prompt=prep.prompt,
                    stable_prefix=prep.stable_prefix,
                    params=prep.params,
                    special=prep.special,
                ),
                then=then,
                on_token=on_token,
            )
    except anyio.get_cancelled_exc_class():
        server.metrics.observe_cancelled(prep.model, queue_wait_s=queue_wait)
        raise
    record = (
        outcome.records[-1]
        if outcome.records
        else PhaseRecord(task_id=task_id, phase_id="", phase=prep.kind)
    )
    server.metrics.observe(prep.model, record, queue_wait_s=queue_wait)
    return Ran(
        task_id=task_id,
        record=record,
        text=outcome.outputs[0] if outcome.outputs else "",
        error=outcome.error,
        queue_wait_s=queue_wait,
        predicted=server.next_models.predict(prep.key, prep.model),
    )


def failure(ran: Ran) -> RequestError:
    """The error a failed phase is reported as."""
    reason = ran.error or "unknown error"
    if "does not fit n_ctx" in reason:
        return RequestError(400, reason, param="messages", code="context_length_exceeded")
    return RequestError(500, f"generation failed: {reason}", kind="server_error")


# --- responses ----------------------------------------------------------------------------


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


def _finish(ran: Ran) -> FinishReason:
    return "length" if ran.record.hit_cap else "stop"


def _load_ns(ran: Ran) -> int:
    """Ollama's ``load_duration``: the swap this request paid (evictions waited for + the
    paid load), in nanoseconds, as the Ollama routes report it. With it go Ollama's
    ``prompt_eval_count`` (prompt tokens evaluated: not restored from the KV cache) and
    ``eval_count`` (tokens generated)."""
    return round((ran.record.evict_s + ran.record.load_s) * 1e9)


def whole_response(prep: Prepared, ran: Ran, response_id: str) -> bytes:
    """The non-streamed response body."""
    created = int(time.time())
    if prep.kind == "chat":
        return msgspec.json.encode(
            ChatCompletion(
                id=response_id,
                created=created,
                model=prep.model,
                choices=[
                    ChatChoice(
                        index=0,
                        message=ChatMessageOut(content=ran.text),
                        finish_reason=_finish(ran),
                    )
                ],
                usage=_usage(prep, ran),
                swapos=timings(ran),
                load_duration=_load_ns(ran),
                prompt_eval_count=ran.record.prefill_tokens,
                eval_count=ran.record.tokens,
            )
        )
    return msgspec.json.encode(
        TextCompletion(
            id=response_id,
            created=created,
            model=prep.model,
            choices=[TextChoice(index=0, text=ran.text, finish_reason=_finish(ran))],
            usage=_usage(prep, ran),
            swapos=timings(ran),
            load_duration=_load_ns(ran),
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

    def piece(self, text: str, *, role: bool = False) -> bytes:
        if self.prep.kind == "chat":
            delta = Delta(role="assistant", content=text) if role else Delta(content=text)
            return sse_event(
                msgspec.json.encode(
                    ChatCompletionChunk(
                        id=self.id,
                        created=self.created,
                        model=self.prep.model,
                        choices=[ChunkChoice(index=0, delta=delta)],
                    )
                )
            )
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

    def last(self, ran: Ran) -> bytes:
        usage, swapos, load_ns = _usage(self.prep, ran), timings(ran), _load_ns(ran)
        chunk: ChatCompletionChunk | TextCompletionChunk
        if self.prep.kind == "chat":
            chunk = ChatCompletionChunk(
                id=self.id,
                created=self.created,
                model=self.prep.model,
                choices=[ChunkChoice(index=0, delta=Delta(), finish_reason=_finish(ran))],
                usage=usage,
                swapos=swapos,
                load_duration=load_ns,
                prompt_eval_count=ran.record.prefill_tokens,
                eval_count=ran.record.tokens,
            )
        else:
            chunk = TextCompletionChunk(
                id=self.id,
                created=self.created,
                model=self.prep.model,
                choices=[TextChoice(index=0, text="", finish_reason=_finish(ran))],
                usage=usage,
                swapos=swapos,
                load_duration=load_ns,
                prompt_eval_count=ran.record.prefill_tokens,
                eval_count=ran.record.tokens,
            )
        return sse_event(msgspec.json.encode(chunk))


def streamer(server: Server, prep: Prepared, response_id: str) -> Callable[[Emit], Awaitable[None]]:
    """The producer of a streamed response: a role chunk, one chunk per decoded piece, a
    last chunk with ``finish_reason``, ``usage`` and ``swapos``, then ``[DONE]``. A phase
    that fails mid-stream ends with an ``error`` event in the OpenAI error shape."""
    chunks = _Chunks(prep, response_id)

    async def produce(emit: Emit) -> None:
        if prep.kind == "chat":
            await emit(chunks.piece("", role=True))
        send, recv = anyio.create_memory_object_stream[str](prep.params.max_tokens + 8)
        ran: Ran | None = None

        def tap(piece: str) -> None:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.WouldBlock):
                send.send_nowait(piece)

        async def generate() -> None:
            nonlocal ran
            with send:
                ran = await run(server, prep, response_id, on_token=tap)

        async with anyio.create_task_group() as tg:
            tg.start_soon(generate)
            with recv:
                async for piece in recv:
                    await emit(chunks.piece(piece))
        assert ran is not None
        if ran.error is not None:
            await emit(sse_event(failure(ran).body()))
        else:
            await emit(chunks.last(ran))
        await emit(sse_event("[DONE]"))

    return produce


def new_response_id(kind: Kind) -> str:
    return new_id("chatcmpl" if kind == "chat" else "cmpl")
