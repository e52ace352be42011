"""The KVCache: saved KV prefix states, keyed by model identity and token prefix."""

from __future__ import annotations

from collections import OrderedDict
from typing import assert_never

import anyio
import msgspec
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.base import Events, Outbox
from swapos.backends.base import PrefixState
from swapos.messages.commands import LookupPrefix, PrefixFound, PrefixMissing, SavePrefix
from swapos.messages.events import KVDropped, KVHit, KVMiss, KVSaved
from swapos.messages.inboxes import KVCacheInbox

log = structlog.get_logger(__name__)


class KVCacheStatistics(msgspec.Struct, frozen=True, kw_only=True):
    entries: int
    bytes: int
    budget_bytes: int
    hits: int
    misses: int
    saves: int
    dropped: int


class KVCache:
    """A RAM tier of prefix states with a byte budget, least recently used dropped first.

    A key is ``(identity, tokens)``: ``identity`` comes from the model
    (:attr:`~swapos.backends.base.LoadedModel.kv_identity`: file digest, size, mtime,
    context and KV settings, library version), so a state is never offered to a model it
    does not belong to. States outlive their model's eviction: they are plain bytes.
    """

    def __init__(
        self,
        *,
        inbox: MemoryObjectReceiveStream[KVCacheInbox],
        outbox: Outbox,
        events: Events,
        budget_bytes: int,
    ) -> None:
        self._inbox = inbox
        self._outbox = outbox
        self._events = events
        self.budget_bytes = budget_bytes
        self._store: OrderedDict[tuple[str, tuple[int, ...]], PrefixState] = OrderedDict()
        self._bytes = 0
        self._hits = self._misses = self._saves = self._dropped = 0

    def statistics(self) -> KVCacheStatistics:
        return KVCacheStatistics(
            entries=len(self._store),
            bytes=self._bytes,
            budget_bytes=self.budget_bytes,
            hits=self._hits,
            misses=self._misses,
            saves=self._saves,
            dropped=self._dropped,
        )

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve lookups and saves until the inbox closes."""
        try:
            async with self._inbox:
                task_status.started()
                async for msg in self._inbox:
                    await self._handle(msg)
        finally:
            with anyio.CancelScope(shield=True):
                await self._outbox.aclose()

    async def _handle(self, msg: KVCacheInbox) -> None:
        match msg:
            case LookupPrefix():
                await self._lookup(msg)
            case SavePrefix():
                await self._save(msg)
            case _:
                assert_never(msg)

    def longest_prefix(self, identity: str, tokens: list[int]) -> PrefixState | None:
        """The saved state for ``identity`` with the longest proper prefix of ``tokens``."""
        best: tuple[str, tuple[int, ...]] | None = None
        n = len(tokens)
        for key in self._store:
            ident, prefix = key
            k = len(prefix)
            if ident != identity or k >= n or (best is not None and k <= len(best[1])):
                continue
            if list(prefix) == tokens[:k]:
                best = key
        if best is None:
            return None
        self._store.move_to_end(best)
        return self._store[best]

    async def _lookup(self, req: LookupPrefix) -> None:
        state = self.longest_prefix(req.identity, req.tokens)
        if state is None:
            self._misses += 1
            await self._events.emit(
                KVMiss(
                    t=self._events.t(),
                    request_id=req.request_id,
                    prompt_tokens=len(req.tokens),
                    reason="no saved prefix",
                )
            )
            await self._outbox.send(req.reply_to, PrefixMissing(request_id=req.request_id))
            return
        self._hits += 1
        await self._events.emit(
            KVHit(t=self._events.t(), request_id=req.request_id, tokens=len(state.tokens))
        )
        await self._outbox.send(req.reply_to, PrefixFound(request_id=req.request_id, state=state))

    async def _save(self, msg: SavePrefix) -> None:
        size = len(msg.state.state)
        key = (msg.identity, msg.state.tokens)
        if size > self.budget_bytes:
            self._dropped += 1
            await self._events.emit(
                KVDropped(
                    t=self._events.t(),
                    model=msg.model,
                    tokens=len(msg.state.tokens),
                    nbytes=size,
                    reason="larger than the KV cache budget",
                )
            )
            return
        old = self._store.pop(key, None)
        if old is not None:
            self._bytes -= len(old.state)
        while self._store and self._bytes + size > self.budget_bytes:
            (_, tokens), dropped = self._store.popitem(last=False)
            self._bytes -= len(dropped.state)
            self._dropped += 1
            await self._events.emit(
                KVDropped(
                    t=self._events.t(),
                    tokens=len(tokens),
                    nbytes=len(dropped.state),
                    reason="least recently used, over budget",
                )
            )
        self._store[key] = msg.state
        self._bytes += size
        self._saves += 1
        await self._events.emit(
            KVSaved(t=self._events.t(), model=msg.model, tokens=len(msg.state.tokens), nbytes=size)
        )
