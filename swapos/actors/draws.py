"""The Generator's draws: several sampled draws of one prompt, each replied as it ends.

A :class:`~swapos.messages.commands.GenerateDraws` runs here, in its own task of the
Generator (which owns the request's cancel scope and stop flag). The draws go to the model in
groups of ``side_by_side`` (a :class:`~swapos.backends.base.DrawsModel` decodes a group as
sequences of one context), one group after another, or one by one in turn on a model that
cannot draw side by side. Each finished draw is logged as its own phase's
``GenerationFinished`` and replied as a :class:`~swapos.messages.commands.DrawFinished` at
once; a :class:`~swapos.messages.commands.StopDraws` (the caller's check passed one) drops
the rest within one step, each logged ``GenerationFailed`` with reason ``stopped``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectSendStream

from swapos.actors.base import Events, Outbox
from swapos.backends.base import (
    DrawOutput,
    DrawsModel,
    GenerationOutput,
    LoadedModel,
    TextPromptModel,
)
from swapos.data.prefix import PrefixState
from swapos.errors import GenerationError, SwapOSError
from swapos.messages.commands import DrawFinished, DrawsDone, GenerateDraws
from swapos.messages.events import GenerationFailed, GenerationFinished, GenerationStarted

Lookup = Callable[[LoadedModel, list[int]], Awaitable[tuple[PrefixState | None, int]]]
"""The Generator's KV lookup: the state to restore for a prompt, and the tokens it shares."""
Servable = Callable[[list[int], Sequence[int]], int]
"""The Generator's ``kv_servable_tokens`` measure for a prompt and what a draw read."""


@dataclass
class DrawsRun:
    """One ``GenerateDraws`` request being served.

    Attributes:
        req: the request.
        model: the leased model.
        events, outbox: the Generator's.
        stop: set by ``StopDraws``; the draws still running are dropped.
        lookup: the KV lookup, None with the KV cache off.
        servable: measures ``kv_servable_tokens`` of each draw.
    """

    req: GenerateDraws
    model: LoadedModel | TextPromptModel
    events: Events
    outbox: Outbox
    stop: threading.Event
    lookup: Lookup | None
    servable: Servable
    finished: list[int] = dataclasses.field(default_factory=list)
    """The draws replied so far, in the order they finished."""

    async def run(self) -> DrawsDone:
        """Every draw to its end (or until stopped); each replied as it ends.

        Raises:
            SwapOSError: the prompt does not fit, or the backend failed
                (``GenerationError``); the draws already replied stay replied.
        """
        for i in range(len(self.req.draws)):
            await self.events.emit(
                GenerationStarted(
                    t=self.events.t(), prompt_chars=len(self.req.prompt), **self._ids(i)
                )
            )
        finished = self.finished
        send, receive = anyio.create_memory_object_stream[DrawOutput](max(len(self.req.draws), 1))
        widest = 1
        failed: list[SwapOSError] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._forward, receive, finished)
            async with send:
                try:
                    widest = await self._decode(send)
                except SwapOSError as exc:  # raised below, outside the task group
                    failed.append(exc)
        if failed:
            raise failed[0]
        stopped = [i for i in range(len(self.req.draws)) if i not in finished]
        for i in stopped:
            await self.events.emit(
                GenerationFailed(t=self.events.t(), reason="stopped", **self._ids(i))
            )
        return DrawsDone(
            request_id=self.req.request_id, finished=finished, stopped=stopped, side_by_side=widest
        )

    async def cancelled(self) -> None:
        """Log the draws not finished as cancelled (the caller shields this)."""
        for i in range(len(self.req.draws)):
            if i not in self.finished:
                await self.events.emit(
                    GenerationFailed(t=self.events.t(), reason="cancelled", **self._ids(i))
                )

    def _ids(self, i: int) -> dict[str, str | None]:
        """The ids of draw ``i``'s events: its own phase, and a request id of its own."""
        return {
            "task_id": self.req.task_id,
            "phase_id": self.req.draws[i].phase_id,
            "model": self.req.model,
            "request_id": f"{self.req.request_id}.{i}",
        }

    async def _decode(self, send: MemoryObjectSendStream[DrawOutput]) -> int:
        """Hand every draw to the model, group by group; the most decoded at once."""
        model, draws = self.model, self.req.draws
        if isinstance(model, TextPromptModel):  # a remote model: in turn, text in
            for i, d in enumerate(draws):
                if self.stop.is_set():
                    break
                out = await model.generate_text(self.req.prompt, d.params, chat=self.req.special)
                send.send_nowait(DrawOutput(index=i, output=out))
            return 1
        tokens = await model.tokenize(self.req.prompt, special=self.req.special)
        if len(tokens) >= model.spec.n_ctx:
            raise GenerationError(
                f"prompt of {len(tokens)} tokens does not fit n_ctx={model.spec.n_ctx} of "
                f"{model.spec.name!r}: raise n_ctx in the profile or lower prompt_budget_tokens"
            )
        restore = (await self.lookup(model, tokens))[0] if self.lookup is not None else None
        k = self.req.side_by_side or len(draws)
        if not isinstance(model, DrawsModel) or k <= 1:
            for i, d in enumerate(draws):
                if self.stop.is_set():
                    break
                out = await model.generate(tokens, d.params, restore=restore)
                send.send_nowait(DrawOutput(index=i, output=self._read(out, tokens)))
            return 1
        for start in range(0, len(draws), k):
            if self.stop.is_set():
                break
            group = draws[start : start + k]

            def on_draw(d: DrawOutput, start: int = start) -> None:
                out = self._read(d.output, tokens)
                send.send_nowait(DrawOutput(index=start + d.index, output=out))

            await model.generate_draws(
                tokens, [d.params for d in group], restore=restore, on_draw=on_draw,
                stop=self.stop.is_set,
            )  # fmt: skip
        return min(k, len(draws))

    def _read(self, out: GenerationOutput, tokens: list[int]) -> GenerationOutput:
        """``out`` with its ``kv_servable_tokens`` measured."""
        servable = self.servable(tokens, out.read or tokens)
        stats = msgspec.structs.replace(out.stats, kv_servable_tokens=servable)
        return msgspec.structs.replace(out, stats=stats)

    async def _forward(
        self, receive: anyio.abc.ObjectReceiveStream[DrawOutput], finished: list[int]
    ) -> None:
        """Log and reply each finished draw as it comes."""
        async with receive:
            async for d in receive:
                finished.append(d.index)
                stats = d.output.stats
                await self.events.emit(
                    GenerationFinished(t=self.events.t(), stats=stats, **self._ids(d.index))
                )
                await self.outbox.send(
                    self.req.reply_to,
                    DrawFinished(
                        request_id=self.req.request_id,
                        index=d.index,
                        text=d.output.text,
                        stats=stats,
                    ),
                )
