"""The Generator: runs generations on leased models, with KV prefix reuse."""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import assert_never

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.base import Events, Outbox, Pending, serving
from swapos.actors.draws import DrawsRun
from swapos.actors.residency import Residency
from swapos.actors.taps import TokenTaps
from swapos.backends.base import GenerationOutput, LoadedModel, TextPromptModel
from swapos.data.prefix import PrefixState
from swapos.errors import GenerationError, SwapOSError
from swapos.messages.base import new_id
from swapos.messages.commands import (
    CancelGeneration,
    DrawsDone,
    Generate,
    Generated,
    GenerateDraws,
    GenerateFailed,
    LookupPrefix,
    PrefixFound,
    PrefixMissing,
    SavePrefix,
    StopDraws,
)
from swapos.messages.events import (
    FirstToken,
    GenerationFailed,
    GenerationFinished,
    GenerationProgress,
    GenerationStarted,
    KVRestoreFailed,
)
from swapos.messages.inboxes import GeneratorInbox
from swapos.policies.tokens import common_prefix_len

log = structlog.get_logger(__name__)

PROGRESS_EVERY = 8
"""Emit a :class:`GenerationProgress` event every this many tokens."""

READ_KEYS = 256
READ_PER_KEY = 8
"""What the Generator remembers to measure ``kv_servable_tokens``: the token sequences the
last :data:`READ_PER_KEY` phases of a (task, model) read, for the last :data:`READ_KEYS`
pairs (a bound, not a cache: nothing is served from it)."""


class GeneratorStatistics(msgspec.Struct, frozen=True, kw_only=True):
    running: int
    finished: int
    failed: int
    cancelled: int


class Generator:
    """One generation per lease, each in its own task (the backend runs it in a worker
    thread). ``CancelGeneration`` or shutdown stops a generation within one token.

    With the KV cache on, each generation restores the saved state sharing the longest
    common prefix with its prompt; when the request names a stable prefix it also snapshots
    the state after it (if longer than what was restored) and the state after the
    generation (prompt + answer: a retry whose prompt appends to it re-reads only what
    changed), and sends both to the KVCache. Each decoded piece also goes to the token tap
    registered for the request's task, if any (streaming to a server's client). A restore
    the backend could not use is a ``KVRestoreFailed`` (the lookup itself is the KVCache's
    ``KVHit``).

    A model that takes text (``TextPromptModel``: a remote endpoint) gets the prompt as it
    is: no tokenizing, no context check (the server checks its own) and no KV state.
    """

    def __init__(
        self,
        *,
        inbox: MemoryObjectReceiveStream[GeneratorInbox],
        outbox: Outbox,
        events: Events,
        residency: Residency,
        use_kv_cache: bool = True,
        taps: TokenTaps | None = None,
    ) -> None:
        self._taps = taps if taps is not None else TokenTaps()
        self._inbox = inbox
        self._outbox = outbox
        self._events = events
        self._residency = residency
        self._use_kv = use_kv_cache
        self._pending = Pending()
        self._running: dict[str, anyio.CancelScope] = {}
        self._stops: dict[str, threading.Event] = {}
        self._tg: TaskGroup | None = None
        self._finished = self._failed = self._cancelled = 0
        self._read: OrderedDict[tuple[str | None, str], list[Sequence[int]]] = OrderedDict()

    def statistics(self) -> GeneratorStatistics:
        return GeneratorStatistics(
            running=len(self._running),
            finished=self._finished,
            failed=self._failed,
            cancelled=self._cancelled,
        )

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve the inbox; on exit every running generation is cancelled and awaited."""
        async with serving(self._inbox, self._outbox) as self._tg:
            task_status.started()
            async for msg in self._inbox:
                await self._handle(msg)

    async def _handle(self, msg: GeneratorInbox) -> None:
        assert self._tg is not None
        match msg:
            case Generate():
                scope = anyio.CancelScope()
                self._running[msg.request_id] = scope
                self._tg.start_soon(self._generate, msg, scope)
            case GenerateDraws():
                scope = anyio.CancelScope()
                self._running[msg.request_id] = scope
                self._stops[msg.request_id] = threading.Event()
                self._tg.start_soon(self._draws, msg, scope)
            case StopDraws(request_id=rid):
                if rid in self._stops:
                    self._stops[rid].set()
            case CancelGeneration(request_id=rid):
                if rid in self._running:
                    self._running[rid].cancel()
            case PrefixFound() | PrefixMissing():
                self._pending.resolve(msg)
            case _:
                assert_never(msg)

    async def _generate(self, req: Generate, scope: anyio.CancelScope) -> None:
        ids = {
            "task_id": req.task_id,
            "phase_id": req.phase_id,
            "model": req.model,
            "request_id": req.request_id,
        }
        reply: Generated | GenerateFailed | None = None
        try:
            with scope:
                model = self._residency.get(req.lease_id)
                if model is None:
                    raise GenerationError(
                        f"lease {req.lease_id} is not held; acquire the model first"
                    )
                await self._events.emit(
                    GenerationStarted(t=self._events.t(), prompt_chars=len(req.prompt), **ids)
                )
                reply = await self._run(req, model, ids)
        except SwapOSError as exc:
            self._failed += 1
            reason = str(exc)
            log.warning("generation.failed", reason=reason, **ids)
            await self._events.emit(GenerationFailed(t=self._events.t(), reason=reason, **ids))
            reply = GenerateFailed(request_id=req.request_id, reason=reason)
        finally:
            self._running.pop(req.request_id, None)
        if reply is None:  # cancelled by CancelGeneration
            self._cancelled += 1
            reply = GenerateFailed(request_id=req.request_id, reason="cancelled")
            await self._events.emit(GenerationFailed(t=self._events.t(), reason="cancelled", **ids))
        await self._outbox.send(req.reply_to, reply)

    async def _draws(self, req: GenerateDraws, scope: anyio.CancelScope) -> None:
        """Serve a ``GenerateDraws`` (:mod:`~swapos.actors.draws`): ``DrawFinished`` per
        draw as it ends, then ``DrawsDone``; ``GenerateFailed`` when it fails or is
        cancelled (the draws replied before stay replied)."""
        reply: DrawsDone | GenerateFailed | None = None
        run: DrawsRun | None = None
        try:
            with scope:
                model = self._residency.get(req.lease_id)
                if model is None:
                    raise GenerationError(
                        f"lease {req.lease_id} is not held; acquire the model first"
                    )
                run = DrawsRun(
                    req=req, model=model, events=self._events, outbox=self._outbox,
                    stop=self._stops[req.request_id],
                    lookup=self._lookup if self._use_kv else None,
                    servable=functools.partial(self._servable_by, (req.task_id, req.model)),
                )  # fmt: skip
                reply = await run.run()
                self._finished += 1
        except SwapOSError as exc:
            self._failed += 1
            log.warning("draws.failed", reason=str(exc), request_id=req.request_id)
            reply = GenerateFailed(request_id=req.request_id, reason=str(exc))
        finally:
            self._running.pop(req.request_id, None)
            self._stops.pop(req.request_id, None)
        if reply is None:  # cancelled by CancelGeneration
            self._cancelled += 1
            reply = GenerateFailed(request_id=req.request_id, reason="cancelled")
            if run is not None:
                await run.cancelled()
        await self._outbox.send(req.reply_to, reply)

    async def _run(
        self, req: Generate, model: LoadedModel, ids: dict[str, str | None]
    ) -> Generated:
        if isinstance(model, TextPromptModel):  # a remote model: no tokens, no KV state
            t0 = self._events.t()
            progress = self._progress(req, ids, t0)
            out = await model.generate_text(
                req.prompt, req.params, chat=req.special, on_token=progress
            )
            await progress.ended()
            return await self._finished_with(req, out, ids, prompt=None)
        tokens = await model.tokenize(req.prompt, special=req.special)
        if len(tokens) >= model.spec.n_ctx:
            raise GenerationError(
                f"prompt of {len(tokens)} tokens does not fit n_ctx={model.spec.n_ctx} of "
                f"{model.spec.name!r}: raise n_ctx in the profile or lower prompt_budget_tokens"
            )
        restore, common = await self._lookup(model, tokens) if self._use_kv else (None, 0)
        save_at = None
        if self._use_kv and req.stable_prefix:
            stable = await model.tokenize(req.stable_prefix, special=req.special)
            n = common_prefix_len(stable, tokens)
            n = min(n, len(tokens) - 1)
            if n > common:
                save_at = n
        t0 = self._events.t()
        progress = self._progress(req, ids, t0)
        out = await model.generate(
            tokens,
            req.params,
            restore=restore,
            save_at=save_at,
            # Only a prompt with a stable prefix is part of a retry loop that appends to it.
            save_final=self._use_kv and bool(req.stable_prefix),
            on_token=progress,
        )
        await progress.ended()
        if restore is not None and out.stats.kv_restored_tokens == 0:
            await self._events.emit(
                KVRestoreFailed(
                    t=self._events.t(),
                    tokens=common,
                    reason="the backend could not restore the state; full prefill",
                    **ids,
                )
            )
        for state in (out.saved, out.prompt_state, out.final):
            if state is not None:
                await self._outbox.send(
                    "kvcache", SavePrefix(identity=model.kv_identity, state=state, model=req.model)
                )
        return await self._finished_with(req, out, ids, prompt=tokens)

    def _progress(self, req: Generate, ids: dict[str, str | None], t0: float) -> _Progress:
        """The ``on_token`` callback of one generation (see :class:`_Progress`)."""
        return _Progress(self._events, self._outbox, self._taps, req, ids, t0)

    async def _finished_with(
        self,
        req: Generate,
        out: GenerationOutput,
        ids: dict[str, str | None],
        *,
        prompt: list[int] | None,
    ) -> Generated:
        """Count, log and reply; ``prompt``: its tokens (None for a remote model: nothing
        of it can be served from a local cache)."""
        self._finished += 1
        servable = 0 if prompt is None else self._servable(req, prompt, out.read or prompt)
        stats = msgspec.structs.replace(out.stats, kv_servable_tokens=servable)
        await self._events.emit(GenerationFinished(t=self._events.t(), stats=stats, **ids))
        return Generated(request_id=req.request_id, text=out.text, stats=stats)

    def _servable(self, req: Generate, prompt: list[int], read: Sequence[int]) -> int:
        """Prompt tokens the same model read earlier in the task (all but the last prompt
        token can come from a cache); remembers ``read`` (prompt, and answer when its state
        was kept) for the phases after this one."""
        return self._servable_by((req.task_id, req.model), prompt, read)

    def _servable_by(
        self, key: tuple[str | None, str], prompt: list[int], read: Sequence[int]
    ) -> int:
        """:meth:`_servable` for the phases of ``key``: (task id, model)."""
        earlier = self._read.pop(key, [])
        best = max((common_prefix_len(seq, prompt) for seq in earlier), default=0)
        self._read[key] = [*earlier[-(READ_PER_KEY - 1) :], read]
        while len(self._read) > READ_KEYS:
            self._read.popitem(last=False)
        return min(best, len(prompt) - 1)

    async def _lookup(
        self, model: LoadedModel, tokens: list[int]
    ) -> tuple[PrefixState | None, int]:
        """The state to restore and how many of its tokens the prompt shares (0 if none)."""
        reply = await self._pending.ask(
            self._outbox,
            "kvcache",
            LookupPrefix(
                request_id=new_id("kv"),
                reply_to="generator",
                identity=model.kv_identity,
                tokens=tokens,
                window=model.kv_window,
            ),
        )
        if not isinstance(reply, PrefixFound):
            return None, 0
        return reply.state, reply.common_tokens or common_prefix_len(reply.state.tokens, tokens)


class _Progress:
    """The ``on_token`` callback of one generation: each piece to the task's token tap (if
    any); on the first piece ``FirstToken``, and the request's ``at_first_token`` schedule to
    the Prefetcher; then ``GenerationProgress`` every :data:`PROGRESS_EVERY` pieces. A
    generation with no piece at all hands the schedule on when it ends (:meth:`ended`).

    The tap is looked up for every piece: a caller that has gone (a client hung up, its
    request cancelled) has removed it, and the pieces decoded before the cancellation
    reaches the generation go nowhere. A tap that raises is a bug of its caller's; it is
    logged and dropped, never the Generator's (and the server's) end."""

    def __init__(  # noqa: PLR0917
        self,
        events: Events,
        outbox: Outbox,
        taps: TokenTaps,
        req: Generate,
        ids: dict[str, str | None],
        t0: float,
    ) -> None:
        self._events, self._outbox, self._taps = events, outbox, taps
        self._req, self._ids, self._t0 = req, ids, t0
        self._failed = False
        self.count = 0

    def _relay(self, piece: str) -> None:
        tap = None if self._failed else self._taps.get(self._req.task_id)
        if tap is None:
            return
        try:
            tap(piece)
        except Exception as exc:  # the caller's bug: its stream ends, the generation goes on
            self._failed = True
            log.warning("generator.tap_failed", task_id=self._req.task_id, error=repr(exc))

    def __call__(self, piece: str) -> None:
        self.count += 1
        self._relay(piece)
        if self.count == 1:
            t = self._events.t()
            self._events.emit_nowait(FirstToken(t=t, ttft_s=t - self._t0, **self._ids))
            if self._req.at_first_token is not None:
                self._outbox.send_nowait("prefetcher", self._req.at_first_token)
        elif self.count % PROGRESS_EVERY == 0:
            self._events.emit_nowait(
                GenerationProgress(
                    t=self._events.t(), tokens=self.count, text_tail=piece, **self._ids
                )
            )

    async def ended(self) -> None:
        """The generation ended: if no piece came, its schedule goes to the Prefetcher now."""
        if self.count == 0 and self._req.at_first_token is not None:
            await self._outbox.send("prefetcher", self._req.at_first_token)
