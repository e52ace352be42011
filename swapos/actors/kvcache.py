"""The KVCache: saved KV prefix states, keyed by model identity and token prefix."""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, assert_never

import anyio
import anyio.to_thread
import msgspec
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.base import Events, Outbox, serving
from swapos.data.prefix import PrefixState
from swapos.kvstore.disk import DiskLookup, DiskPut, DiskStore
from swapos.kvstore.ram import Dropped, RamStore
from swapos.messages.commands import (
    KVRamResized,
    LookupPrefix,
    PrefixFound,
    PrefixMissing,
    ResizeKVRam,
    SavePrefix,
)
from swapos.messages.events import KVDropped, KVHit, KVMiss, KVSaved
from swapos.messages.inboxes import KVCacheInbox
from swapos.sysinfo import release_free_heap

log = structlog.get_logger(__name__)

T = TypeVar("T")

DEFAULT_KV_DISK_BYTES = 4 * 2**30
"""Default size bound of the disk tier."""

MIN_COMMON_TOKENS = 32
"""Fewest common tokens for which a *diverging* state is offered (it is restored, then
truncated): below that, restoring a whole state to reuse a few tokens is not worth it."""

TRIM_AFTER_BYTES = 64 * 2**20
"""RAM-tier drops (bytes) after which the KVCache gives freed heap back to the OS."""


class KVCacheStatistics(msgspec.Struct, frozen=True, kw_only=True):
    entries: int
    bytes: int
    budget_bytes: int
    hits: int
    misses: int
    saves: int
    dropped: int
    disk_dir: str | None = None
    disk_budget_bytes: int = 0
    disk_hits: int = 0
    disk_saves: int = 0
    disk_rejected: int = 0
    disk_errors: int = 0
    disk_read_only: bool = False
    """A write found the disk tier read-only: it is read from, no longer written to."""
    yielded: int = 0
    """RAM-tier states dropped to make room for models under the process budget."""


_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


class KVCache:
    """Prefix states in two tiers: RAM (a byte budget, LRU) and, optionally, disk.

    A key is ``(identity, tokens)``: ``identity`` comes from the model
    (:attr:`~swapos.backends.base.LoadedModel.kv_identity`: file digest, size, mtime,
    context and KV settings, library version), so a state is never offered to a model it
    does not belong to. States outlive their model's eviction (they are plain bytes) and,
    with a disk tier, the process: the disk store verifies every file it reads and deletes
    a bad one, which is then a miss with the reason, never an error.

    A lookup takes the state sharing the longest common prefix with the prompt over both
    tiers (a disk hit is copied into RAM): a state that is a prefix of the prompt, or one
    that diverges from it after at least ``min_common_tokens`` tokens (the backend restores it
    and drops the KV cells past the common part, e.g. a previous attempt's prompt + answer).
    Each lookup is one event: ``KVHit`` (a state is offered) or ``KVMiss`` (none); a state
    the backend then cannot use is the Generator's ``KVRestoreFailed``.
    A save goes to RAM and is written through to disk. Disk I/O runs in worker threads
    behind a :class:`~anyio.CapacityLimiter` of one, never on the event loop; messages are
    handled one at a time, so a lookup queued behind a save sees it. A disk tier found
    read-only by a write (a read-only user cache) stays in use for lookups; saves then go to
    RAM only (one ``KVDropped`` and one warning say so).

    Args:
        budget_bytes: RAM budget.
        disk_dir: directory of the disk tier (None: RAM only); created on the first save.
            :func:`~swapos.kvstore.disk.default_kv_dir` is the user's cache.
        disk_budget_bytes: size bound of the disk tier.
        min_common_tokens: fewest common tokens for which a diverging state is offered.
        trim_after_bytes: after the RAM tier has dropped this many bytes of states, give
            freed heap back to the OS (``release_heap``, in a worker thread): states are
            10-30 MiB each and glibc keeps what worker threads free, so a long-running
            server's RSS would carry every dropped state.
        release_heap: what gives the heap back (:func:`swapos.sysinfo.release_free_heap`).
    """

    def __init__(
        self,
        *,
        inbox: MemoryObjectReceiveStream[KVCacheInbox],
        outbox: Outbox,
        events: Events,
        budget_bytes: int,
        disk_dir: Path | None = None,
        disk_budget_bytes: int = DEFAULT_KV_DISK_BYTES,
        min_common_tokens: int = MIN_COMMON_TOKENS,
        trim_after_bytes: int = TRIM_AFTER_BYTES,
        release_heap: Callable[[], object] = release_free_heap,
    ) -> None:
        self._min_common = max(1, min_common_tokens)
        self._trim_after = trim_after_bytes
        self._release_heap = release_heap
        self._dropped_since_trim = 0
        self._inbox = inbox
        self._outbox = outbox
        self._events = events
        self._ram = RamStore(budget_bytes)
        self._disk = DiskStore(disk_dir, disk_budget_bytes) if disk_dir is not None else None
        self._limiter: anyio.CapacityLimiter | None = None
        self._hits = self._misses = self._saves = self._dropped = 0
        self._disk_hits = self._disk_saves = self._disk_rejected = self._disk_errors = 0
        self._disk_read_only = False
        self._yielded = 0

    @property
    def budget_bytes(self) -> int:
        """The RAM tier's budget."""
        return self._ram.budget_bytes

    @property
    def disk_dir(self) -> Path | None:
        """Where the disk tier lives (None without one)."""
        return self._disk.root if self._disk is not None else None

    def statistics(self) -> KVCacheStatistics:
        return KVCacheStatistics(
            entries=len(self._ram),
            bytes=self._ram.nbytes,
            budget_bytes=self._ram.budget_bytes,
            hits=self._hits,
            misses=self._misses,
            saves=self._saves,
            dropped=self._dropped,
            disk_dir=str(self._disk.root) if self._disk is not None else None,
            disk_budget_bytes=self._disk.budget_bytes if self._disk is not None else 0,
            disk_hits=self._disk_hits,
            disk_saves=self._disk_saves,
            disk_rejected=self._disk_rejected,
            disk_errors=self._disk_errors,
            disk_read_only=self._disk_read_only,
            yielded=self._yielded,
        )

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve lookups and saves until the inbox closes.

        On cancellation a disk write already in its thread completes (its file is renamed
        into place whole, or not at all) before the cancellation propagates.
        """
        self._limiter = anyio.CapacityLimiter(1)
        async with serving(self._inbox, self._outbox):
            task_status.started()
            async for msg in self._inbox:
                await self._handle(msg)

    async def _handle(self, msg: KVCacheInbox) -> None:
        match msg:
            case LookupPrefix():
                await self._lookup(msg)
            case SavePrefix():
                await self._save(msg)
            case ResizeKVRam():
                await self._resize(msg)
            case _:
                assert_never(msg)

    async def _in_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        call = functools.partial(fn, *args, **kwargs)
        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    async def _lookup(self, req: LookupPrefix) -> None:
        min_partial = self._min_common
        state, common = self._ram.longest_common(
            req.identity, req.tokens, min_partial=min_partial, window=req.window
        )
        tier: str = "ram"
        rejected: list[Dropped] = []
        if self._disk is not None and common < len(req.tokens):
            found = await self._disk_lookup(req, common, min_partial)
            rejected = found.rejected
            for drop in rejected:
                await self._drop(drop, tier="disk", request_id=req.request_id)
            if found.state is not None:
                state, tier, common = found.state, "disk", found.common
                self._disk_hits += 1
                await self._put_ram(req.identity, found.state, None)
        if state is None:
            self._misses += 1
            reason = "no saved prefix"
            if rejected:
                reason += "; rejected on disk: " + "; ".join(d.reason for d in rejected)
            await self._events.emit(
                KVMiss(
                    t=self._events.t(),
                    request_id=req.request_id,
                    prompt_tokens=len(req.tokens),
                    reason=reason,
                )
            )
            await self._outbox.send(req.reply_to, PrefixMissing(request_id=req.request_id))
            return
        self._hits += 1
        await self._events.emit(
            KVHit(t=self._events.t(), request_id=req.request_id, tokens=common, tier=tier)
        )
        reply = PrefixFound(
            request_id=req.request_id,
            state=state,
            tier="disk" if tier == "disk" else "ram",
            common_tokens=common,
        )
        await self._outbox.send(req.reply_to, reply)

    async def _disk_lookup(
        self, req: LookupPrefix, longer_than: int, min_partial: int
    ) -> DiskLookup:
        assert self._disk is not None
        try:
            return await self._in_thread(
                self._disk.longest_common,
                req.identity,
                req.tokens,
                longer_than=longer_than,
                min_partial=min_partial,
                window=req.window,
            )
        except OSError as exc:  # DiskStore turns file errors into rejections; belt and braces
            self._disk_errors += 1
            log.warning("kv_disk.lookup_failed", error=str(exc))
            return DiskLookup()

    async def _save(self, msg: SavePrefix) -> None:
        tiers: list[str] = []
        if await self._put_ram(msg.identity, msg.state, msg.model):
            tiers.append("ram")
        if self._disk is not None and not self._disk_read_only and await self._put_disk(msg):
            tiers.append("disk")
        if not tiers:
            return
        self._saves += 1
        await self._events.emit(
            KVSaved(
                t=self._events.t(),
                model=msg.model,
                tokens=len(msg.state.tokens),
                nbytes=len(msg.state.state),
                tier="+".join(tiers),
            )
        )

    async def _resize(self, msg: ResizeKVRam) -> None:
        """The Loader's share of the process budget for the RAM tier: drop to fit, reply."""
        dropped = self._ram.resize(msg.budget_bytes, reason="yielded to a model (budget)")
        for drop in dropped:
            await self._drop(drop, tier="ram", request_id=msg.request_id)
        self._yielded += len(dropped)
        await self._outbox.send(
            msg.reply_to,
            KVRamResized(
                request_id=msg.request_id,
                budget_bytes=self._ram.budget_bytes,
                dropped=len(dropped),
                dropped_bytes=sum(d.nbytes for d in dropped),
                nbytes=self._ram.nbytes,
            ),
        )

    async def _put_ram(self, identity: str, state: PrefixState, model: str | None) -> bool:
        kept, dropped = self._ram.put(identity, state)
        for drop in dropped:
            await self._drop(drop, tier="ram", model=model)
        self._dropped_since_trim += sum(d.nbytes for d in dropped)
        if dropped and self._dropped_since_trim >= self._trim_after:
            self._dropped_since_trim = 0
            await self._in_thread(self._release_heap)
        return kept

    async def _put_disk(self, msg: SavePrefix) -> bool:
        assert self._disk is not None
        try:
            put: DiskPut = await self._in_thread(self._disk.put, msg.identity, msg.state)
        except OSError as exc:
            self._disk_errors += 1
            reason = f"disk write failed: {exc}"
            if exc.errno in _READ_ONLY:  # a read-only cache: keep reading it, stop writing
                self._disk_read_only = True
                reason += "; the disk tier is read-only: its states are used, no more are saved"
                log.warning(
                    "kv_disk.read_only",
                    dir=str(self._disk.root),
                    error=str(exc),
                    hint="make it writable, or set XDG_CACHE_HOME to a writable folder",
                )
            else:
                log.warning("kv_disk.write_failed", error=str(exc), model=msg.model)
            drop = Dropped(tokens=len(msg.state.tokens), nbytes=len(msg.state.state), reason=reason)
            await self._drop(drop, tier="disk", model=msg.model)
            return False
        for drop in put.dropped:
            await self._drop(drop, tier="disk", model=msg.model)
        if put.stored:
            self._disk_saves += 1
        return put.stored

    async def _drop(
        self,
        drop: Dropped,
        *,
        tier: str,
        model: str | None = None,
        request_id: str | None = None,
    ) -> None:
        self._dropped += 1
        if tier == "disk" and drop.reason.startswith("corrupt"):
            self._disk_rejected += 1
        await self._events.emit(
            KVDropped(
                t=self._events.t(),
                model=model,
                request_id=request_id,
                tokens=drop.tokens,
                nbytes=drop.nbytes,
                reason=drop.reason,
                tier=tier,
            )
        )
