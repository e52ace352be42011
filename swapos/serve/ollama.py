"""Ollama's API on the OpenAI routes' port: ``/api/chat``, ``/api/generate`` and friends.

A request is translated into the OpenAI routes' checked :class:`~swapos.serve.completions.
Prepared` request and runs exactly as they do: the same model queues, prefetch schedule and
KV prefix cache (:func:`~swapos.serve.completions.run`). Responses are Ollama's: NDJSON lines
by default (``"stream": false``: one object), with Ollama's counters in nanoseconds, and
errors as ``{"error": "..."}`` with Ollama's status codes. ``keep_alive`` is a residency hint
(:mod:`swapos.policies.keepalive`): ``0`` unloads the model once the request is done (unless
another request is using or waiting for it), a duration unloads it when it has been idle that
long, and no ``keep_alive`` leaves it to the budget, as every SwapOS model is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from swapos.policies.keepalive import KeepAliveError, parse_keep_alive
from swapos.serve.bodies import decode, read_body
from swapos.serve.completions import ContextAsk, Prepared, prepare_chat, prepare_text
from swapos.serve.errors import RequestError
from swapos.serve.fields import checked_fields
from swapos.serve.heartbeat import Status, heartbeat
from swapos.serve.ollama_admin import ps, show, tags, version
from swapos.serve.ollama_models import now_rfc3339
from swapos.serve.ollama_requests import (
    chat_request,
    ollama_calls,
    response_format,
    sampling_fields,
)
from swapos.serve.ollama_schemas import (
    ChatChunk,
    ChatRequest,
    GenerateChunk,
    GenerateRequest,
    OllamaToolCall,
    Options,
    OutMessage,
    Stats,
)
from swapos.serve.responses import new_response_id, read_calls, timings
from swapos.serve.running import Ran, failure, run, run_streamed
from swapos.serve.schemas import ChatCompletionRequest, ChatMessageIn, CompletionRequest
from swapos.serve.sse import Emit, EventStream
from swapos.serve.state import Server
from swapos.serve.tools import response_schema, schema_constraint
from swapos.structured.stream import CallStream

T = TypeVar("T")
NDJSON = "application/x-ndjson"
Authorize = Callable[[Request], None]
ClientKey = Callable[[Request], str | None]
Handler = Callable[[Request], Awaitable[Any]]


class OllamaError(Exception):
    """A request refused or failed, answered in Ollama's shape: ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    @classmethod
    def of(cls, exc: RequestError) -> OllamaError:
        """The OpenAI routes' error, in Ollama's shape (same status and message)."""
        return cls(exc.status, exc.message)

    def body(self) -> bytes:
        return msgspec.json.encode({"error": self.message})

    def response(self) -> Response:
        return Response(self.body(), status_code=self.status, media_type="application/json")


def _ns(seconds: float) -> int:
    return max(0, round(seconds * 1e9))


@dataclasses.dataclass(frozen=True)
class _Ask:
    """One checked generation request: what it runs and how it is answered."""

    prep: Prepared
    requested: str
    keep: float | None
    started: float


class Ollama:
    """The Ollama routes over one served app's :class:`~swapos.serve.state.Server`.

    Args:
        server: the app's shared state (queues, counters, the system).
        authorize: raises :class:`RequestError` (401) for a request without the right key.
        client_key: the client a request's model transitions are learned for.
    """

    def __init__(self, server: Server, authorize: Authorize, client_key: ClientKey) -> None:
        self.server = server
        self._authorize = authorize
        self._client_key = client_key

    def routes(self) -> list[Route]:
        """The ``/api/...`` routes (Ollama's paths and methods)."""
        server = self.server

        def route(path: str, handler: Handler, method: str) -> Route:
            async def endpoint(request: Request) -> Any:
                try:
                    self._authorize(request)
                    return await handler(request)
                except RequestError as exc:
                    return OllamaError.of(exc).response()
                except OllamaError as exc:
                    return exc.response()

            return Route(path, endpoint, methods=[method])

        async def on_show(request: Request) -> Response:
            return await show(server, await read_body(request, server.settings.max_body_bytes))

        return [
            route("/api/chat", self.chat, "POST"),
            route("/api/generate", self.generate, "POST"),
            route("/api/tags", lambda r: tags(server), "GET"),
            route("/api/ps", lambda r: ps(server, server.expiry.keep_alive), "GET"),
            route("/api/show", on_show, "POST"),
            route("/api/version", lambda r: version(), "GET"),
        ]

    # --- the handlers ---------------------------------------------------------------------

    async def chat(self, request: Request) -> Any:
        started = self.server.system.clock.now()
        body = await self._body(request, ChatRequest, "ollama.chat")
        model = self._model(body.model)
        keep = _keep(body.keep_alive)
        if not body.messages:
            return await self._load_or_unload(model, body.model, keep, chat=True)
        options = body.options or Options()
        oa = chat_request(body, model, _max_tokens(options))
        key = self._client_key(request)
        prep = await prepare_chat(self.server, oa, key, context=_context(options))
        ask = _Ask(prep=dataclasses.replace(prep, stream=body.stream), requested=body.model,
                   keep=keep, started=started)  # fmt: skip
        return await self._answer(ask)

    async def generate(self, request: Request) -> Any:
        started = self.server.system.clock.now()
        body = await self._body(request, GenerateRequest, "ollama.generate")
        model = self._model(body.model)
        keep = _keep(body.keep_alive)
        if body.raw and body.system:
            raise OllamaError(400, "raw mode does not support template, system, or context")
        if not body.prompt and body.suffix is None:
            return await self._load_or_unload(model, body.model, keep, chat=False)
        options = body.options or Options()
        key = self._client_key(request)
        fields = sampling_fields(options, _max_tokens(options))
        answer = response_format(body.format)
        prep: Prepared
        chat = await self.server.system.chat_format(model)
        if not body.raw and body.suffix is None and chat is not None:
            turns = [ChatMessageIn(role="system", content=body.system)] if body.system else []
            turns.append(ChatMessageIn(role="user", content=body.prompt))
            oa = ChatCompletionRequest(
                model=model, messages=turns, response_format=answer, **fields
            )
            prep = await prepare_chat(self.server, oa, key, context=_context(options))
        else:  # raw, fill-in-the-middle, or a base model: the prompt as is
            text = f"{body.system}\n\n{body.prompt}" if body.system else body.prompt
            ot = CompletionRequest(model=model, prompt=text, suffix=body.suffix, **fields)
            schema = response_schema(answer)
            constraint = schema_constraint(*schema, param="format") if schema else None
            prep = await prepare_text(
                self.server, ot, key, constraint=constraint, context=_context(options)
            )
        prep = dataclasses.replace(prep, kind="text", stream=body.stream)
        ask = _Ask(prep=prep, requested=body.model, keep=keep, started=started)
        return await self._answer(ask)

    # --- running and answering ------------------------------------------------------------

    async def _answer(self, ask: _Ask) -> Response | EventStream:
        task_id = new_response_id("chat" if ask.prep.kind == "chat" else "text")
        if not ask.prep.stream:
            ran = await run(self.server, ask.prep, task_id)
            ended = self.server.system.clock.now()
            if ran.error is not None:
                await self._after(ask)
                raise OllamaError.of(failure(ran))
            await self._after(ask)
            parsed = read_calls(ask.prep, ran.text)
            calls = ollama_calls(parsed.calls) or None
            return _json(self._last(ask, ran, ended, text=parsed.content, calls=calls))
        return EventStream(self._streamer(ask, task_id), media_type=NDJSON)

    def _streamer(self, ask: _Ask, task_id: str) -> Callable[[Emit], Awaitable[None]]:
        """NDJSON lines: one per decoded piece, the last with ``done``; while the stream is
        silent, empty pieces whose ``swapos`` field says how the request goes."""

        def render(status: Status) -> bytes:
            return _line(msgspec.structs.replace(self._piece(ask, ""), swapos=status))

        async def produce(client: Emit) -> None:
            beat = heartbeat(self.server, client, render)
            emit = beat.send
            tools = ask.prep.tools
            split = CallStream(tools.fmt, tools.offered) if tools is not None else None

            async def each(piece: str) -> None:
                text = split.add(piece) if split is not None else piece
                if text:
                    await emit(_line(self._piece(ask, text)))

            async with beat.beating():
                ran = await run_streamed(self.server, ask.prep, task_id, each, beat.queued)
            ended = self.server.system.clock.now()
            await self._after(ask)
            if ran.error is not None:
                await emit(OllamaError.of(failure(ran)).body() + b"\n")
                return
            if split is not None:
                rest, parsed = split.finish()
                if rest:
                    await emit(_line(self._piece(ask, rest)))
                if parsed.calls:
                    calls = ollama_calls(read_calls(ask.prep, split.text).calls)
                    await emit(_line(self._piece(ask, "", calls=calls)))
            await emit(_line(self._last(ask, ran, ended, text="")))

        return produce

    def _piece(
        self, ask: _Ask, text: str, calls: list[OllamaToolCall] | None = None
    ) -> ChatChunk | GenerateChunk:
        created = now_rfc3339()
        if ask.prep.kind == "chat":
            return ChatChunk(
                model=ask.requested, created_at=created,
                message=OutMessage(content=text, tool_calls=calls or msgspec.UNSET), done=False,
            )  # fmt: skip
        return GenerateChunk(model=ask.requested, created_at=created, response=text, done=False)

    def _last(
        self,
        ask: _Ask,
        ran: Ran,
        ended: float,
        *,
        text: str,
        calls: list[OllamaToolCall] | None = None,
    ) -> ChatChunk | GenerateChunk:
        r = ran.record
        stats = Stats(
            total_duration=_ns(ended - ask.started),
            load_duration=_ns(r.evict_s + r.load_s),
            prompt_eval_count=r.prefill_tokens,
            prompt_eval_duration=_ns(r.prefill_s),
            eval_count=r.tokens,
            eval_duration=_ns(max(0.0, r.ttft_s - r.prefill_s) + r.gen_s),
        )
        common: dict[str, Any] = {
            **msgspec.structs.asdict(stats),
            "model": ask.requested,
            "created_at": now_rfc3339(),
            "done": True,
            "done_reason": "length" if r.hit_cap else "stop",
            "swapos": timings(ran),
        }
        if ask.prep.kind == "chat":
            message = OutMessage(content=text, tool_calls=calls or msgspec.UNSET)
            return ChatChunk(message=message, **common)
        return GenerateChunk(response=text, **common)

    async def _after(self, ask: _Ask) -> None:
        """Carry out the request's keep-alive once it is done."""
        model = ask.prep.model
        if ask.keep == 0:
            await self.server.expiry.unload_if_idle(model)
        elif ask.keep is not None:
            self.server.expiry.finished(model, ask.keep)  # a ttl was applied by run()

    async def _load_or_unload(
        self, model: str, requested: str, keep: float | None, *, chat: bool
    ) -> Response:
        """Ollama's empty request: load the model, or with ``keep_alive`` 0 unload it."""
        if keep == 0:
            await self.server.expiry.unload_if_idle(model)
            reason = "unload"
        else:
            async with self.server.scheduler.turn(model):
                failed = await self.server.system.preload([model])
            if model in failed:
                raise OllamaError(500, f"cannot load {requested!r}: {failed[model]}")
            self.server.expiry.finished(model, keep)
            reason = "load"
        created = now_rfc3339()
        chunk: ChatChunk | GenerateChunk
        if chat:
            chunk = ChatChunk(model=requested, created_at=created, message=OutMessage(),
                              done=True, done_reason=reason)  # fmt: skip
        else:
            chunk = GenerateChunk(model=requested, created_at=created, response="", done=True,
                                  done_reason=reason)  # fmt: skip
        return _json(chunk)

    # --- checks ---------------------------------------------------------------------------

    async def _body(self, request: Request, kind: type[T], api: str) -> T:
        raw = await read_body(request, self.server.settings.max_body_bytes)
        if not raw.strip():
            raise OllamaError(400, "missing request body")
        checked_fields(api, raw)
        return decode(raw, kind)

    def _model(self, requested: str) -> str:
        if not requested:
            raise OllamaError(400, "model is required")
        model = self.server.names.resolve(requested)
        if model is None:
            known = self.server.names.known()
            raise OllamaError(
                404,
                f'model "{requested}" not found, try pulling it first (this server\'s models '
                f"are: {known})",
            )
        return model


def _keep(value: float | str | None) -> float | None:
    try:
        return parse_keep_alive(value)
    except KeepAliveError as exc:
        raise OllamaError(400, str(exc)) from exc


def _max_tokens(options: Options) -> int | None:
    """``num_predict``: a count; -1 (until the answer ends) and -2 (fill the context) are
    None here: the answer takes the room its context has (:func:`_context`)."""
    n = options.num_predict
    if n is None or n in (-1, -2):
        return None
    if n < 1:
        raise OllamaError(400, f"options.num_predict must be at least 1, or -1 or -2; got {n}")
    return n


def _context(options: Options) -> ContextAsk:
    """What ``options`` ask of the context: ``num_ctx`` (the model is loaded with that much,
    up to its cap), and whether the answer fills the room it has (``num_predict`` -1, -2).

    Raises:
        OllamaError: a ``num_ctx`` below 1.
    """
    if options.num_ctx is not None and options.num_ctx < 1:
        raise OllamaError(400, f"options.num_ctx must be at least 1, got {options.num_ctx}")
    return ContextAsk(num_ctx=options.num_ctx, fill=options.num_predict in (-1, -2))


def _line(chunk: ChatChunk | GenerateChunk) -> bytes:
    return msgspec.json.encode(chunk) + b"\n"


def _json(chunk: ChatChunk | GenerateChunk) -> Response:
    return Response(msgspec.json.encode(chunk), media_type="application/json; charset=utf-8")
