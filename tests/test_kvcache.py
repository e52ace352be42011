"""The KVCache actor: tiers, budgets, identity, corruption; alone and in a fake system."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from swapos.actors.base import Events, Outbox
from swapos.actors.kvcache import KVCache
from swapos.actors.system import open_system
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.data.prefix import PrefixState
from swapos.data.sampling import SamplingParams
from swapos.messages.base import new_id
from swapos.messages.commands import LookupPrefix, PhaseSpec, PrefixFound, SavePrefix
from swapos.messages.events import AnyEvent, KVDropped, KVHit, KVMiss, KVRestoreFailed, KVSaved
from swapos.models.spec import ModelSpec
from swapos.testing import FakeClock
from tests.fakes import fake_profile, fake_system

pytestmark = pytest.mark.anyio

ID = "model-a;n_ctx=2048"
STABLE = "You are a careful coder. Here is the brief and the starter code. " * 2


class Harness:
    """A KVCache actor wired to streams the test reads."""

    def __init__(
        self,
        actor: KVCache,
        inbox: MemoryObjectSendStream[Any],
        replies: MemoryObjectReceiveStream[Any],
        events: MemoryObjectReceiveStream[Any],
    ) -> None:
        self.actor, self._inbox, self._replies, self._events = actor, inbox, replies, events
        self.seen: list[AnyEvent] = []

    async def save(self, identity: str, tokens: list[int], size: int = 100) -> None:
        state = PrefixState(tokens=tuple(tokens), state=bytes(size))
        await self._inbox.send(SavePrefix(identity=identity, state=state, model="a"))

    async def lookup(
        self, identity: str, tokens: list[int], window: int | None = None
    ) -> PrefixFound | None:
        rid = new_id("kv")
        await self._inbox.send(
            LookupPrefix(
                request_id=rid,
                reply_to="generator",
                identity=identity,
                tokens=tokens,
                window=window,
            )
        )
        reply = await self._replies.receive()
        assert reply.request_id == rid
        self.drain()
        return reply if isinstance(reply, PrefixFound) else None

    def drain(self) -> list[AnyEvent]:
        while True:
            try:
                self.seen.append(self._events.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                return self.seen


@asynccontextmanager
async def kvcache(
    *,
    budget: int = 10_000,
    disk_dir: Path | None = None,
    disk_bytes: int = 10**6,
    **options: Any,
) -> AsyncIterator[Harness]:
    inbox_send, inbox_recv = anyio.create_memory_object_stream[Any](32)
    gen_send, gen_recv = anyio.create_memory_object_stream[Any](32)
    rec_send, rec_recv = anyio.create_memory_object_stream[Any](1000)
    outbox = Outbox({"generator": gen_send, "recorder": rec_send})
    actor = KVCache(
        inbox=inbox_recv,
        outbox=outbox,
        events=Events(outbox, FakeClock(), 0.0),
        budget_bytes=budget,
        disk_dir=disk_dir,
        disk_budget_bytes=disk_bytes,
        **options,
    )
    with gen_recv, rec_recv:
        async with anyio.create_task_group() as tg:
            await tg.start(actor.run)
            harness = Harness(actor, inbox_send, gen_recv, rec_recv)
            async with inbox_send:
                yield harness
        harness.drain()


def corrupt_last_byte(root: Path) -> Path:
    (path,) = root.glob("*/*.kv")
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x55
    path.write_bytes(bytes(data))
    return path


def disk_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("*/*.kv"))


def of(events: list[AnyEvent], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


# -- the actor alone -----------------------------------------------------------------------


async def test_longest_prefix_wins_across_tiers_and_disk_hit_is_promoted(tmp_path: Path) -> None:
    with anyio.fail_after(10):
        async with kvcache(disk_dir=tmp_path) as old:
            await old.save(ID, [1, 2, 3, 4])
        async with kvcache(disk_dir=tmp_path) as kv:
            await kv.save(ID, [1, 2])  # RAM and disk; shorter than the older disk state
            hit = await kv.lookup(ID, [1, 2, 3, 4, 5])
            assert hit is not None and hit.tier == "disk" and len(hit.state.tokens) == 4
            again = await kv.lookup(ID, [1, 2, 3, 4, 5])
            assert again is not None and again.tier == "ram"
    assert [(e.tokens, e.tier) for e in of(kv.seen, KVHit)] == [(4, "disk"), (4, "ram")]


async def test_state_survives_a_new_process_through_the_disk_tier(tmp_path: Path) -> None:
    with anyio.fail_after(10):
        async with kvcache(disk_dir=tmp_path) as first:
            await first.save(ID, [1, 2, 3])
        assert [e.tier for e in of(first.seen, KVSaved)] == ["ram+disk"]
        async with kvcache(disk_dir=tmp_path) as fresh:
            hit = await fresh.lookup(ID, [1, 2, 3, 9])
    assert hit is not None and hit.state.tokens == (1, 2, 3) and hit.tier == "disk"
    assert fresh.actor.statistics().disk_hits == 1


@pytest.mark.parametrize("other", ["model-a;n_ctx=4096", "model-b;n_ctx=2048"])
async def test_state_is_refused_for_another_model_or_context(tmp_path: Path, other: str) -> None:
    with anyio.fail_after(10):
        async with kvcache(disk_dir=tmp_path) as kv:
            await kv.save(ID, [1, 2, 3])
            assert await kv.lookup(other, [1, 2, 3, 4]) is None
        async with kvcache(disk_dir=tmp_path) as fresh:
            assert await fresh.lookup(other, [1, 2, 3, 4]) is None
    assert [e.reason for e in of(fresh.seen, KVMiss)] == ["no saved prefix"]


async def test_corrupted_disk_file_is_a_miss_with_reason_and_deleted(tmp_path: Path) -> None:
    with anyio.fail_after(10):
        async with kvcache(disk_dir=tmp_path) as kv:
            await kv.save(ID, [1, 2, 3])
        path = corrupt_last_byte(tmp_path)
        async with kvcache(disk_dir=tmp_path) as fresh:
            assert await fresh.lookup(ID, [1, 2, 3, 4]) is None
    (miss,) = of(fresh.seen, KVMiss)
    assert "checksum mismatch" in miss.reason
    (dropped,) = of(fresh.seen, KVDropped)
    assert dropped.tier == "disk" and "deleted" in dropped.reason
    assert not path.exists()
    assert fresh.actor.statistics().disk_rejected == 1


async def test_ram_tier_never_exceeds_its_budget() -> None:
    with anyio.fail_after(10):
        async with kvcache(budget=250) as kv:
            for i in range(6):
                await kv.save(ID, [i, i], size=100)
                await kv.lookup(ID, [99])  # a round trip: the save has been handled
                assert kv.actor.statistics().bytes <= 250
            await kv.save(ID, [7], size=300)  # alone over budget: refused, nothing evicted
            await kv.lookup(ID, [99])
            stats = kv.actor.statistics()
            assert (stats.entries, stats.bytes) == (2, 200)
            assert await kv.lookup(ID, [5, 5, 0]) is not None  # the newest survived
            assert await kv.lookup(ID, [0, 0, 0]) is None  # the oldest did not
    reasons = [e.reason for e in of(kv.seen, KVDropped)]
    assert reasons.count("least recently used, over the RAM budget") == 4
    assert "larger than the RAM budget" in reasons


async def test_disk_tier_never_exceeds_its_budget(tmp_path: Path) -> None:
    with anyio.fail_after(10):
        async with kvcache(disk_dir=tmp_path, disk_bytes=1000) as kv:
            for i in range(8):
                await kv.save(ID, [i], size=300)
                await kv.lookup(ID, [99])
                assert disk_bytes(tmp_path) <= 1000
    assert any(e.tier == "disk" for e in of(kv.seen, KVDropped))


async def test_failing_disk_write_is_reported_and_ram_still_serves(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with anyio.fail_after(10):
        async with kvcache(disk_dir=blocker) as kv:
            await kv.save(ID, [1, 2])
            hit = await kv.lookup(ID, [1, 2, 3])
    assert hit is not None and hit.tier == "ram"
    (dropped,) = of(kv.seen, KVDropped)
    assert dropped.tier == "disk" and dropped.reason.startswith("disk write failed")
    assert [e.tier for e in of(kv.seen, KVSaved)] == ["ram"]


# -- in a fake system ----------------------------------------------------------------------


def phase(model: str, tail: str) -> PhaseSpec:
    return PhaseSpec(phase="code", model=model, prompt=STABLE + tail, stable_prefix=STABLE,
                     params=SamplingParams(max_tokens=4))  # fmt: skip


SCRIPTS = {
    "a": FakeModelScript(load_s=1.0, prefill_s_per_token=0.01, reply="x y", footprint_bytes=100),
    "b": FakeModelScript(load_s=1.0, prefill_s_per_token=0.01, reply="z", footprint_bytes=100),
}


async def test_retry_restores_the_stable_prefix_after_its_model_was_evicted() -> None:
    clock = FakeClock()
    with anyio.fail_after(10):
        async with clock.autojump(), fake_system(SCRIPTS, budget=100, clock=clock) as (sys, fb):
            out = await sys.run_phases(
                "t1", [phase("a", "attempt 1"), phase("b", "review"), phase("a", "attempt two")]
            )
    assert fb.loads == ["a", "b", "a"]  # a was evicted and reloaded in between
    first, _, retry = out.records
    assert first.kv_restored_tokens == 0
    # attempt 1's final state (prompt + answer) shares STABLE + "attempt " with the retry
    common = len(STABLE + "attempt ")
    assert retry.kv_restored_tokens == common
    assert retry.prefill_tokens == len(STABLE + "attempt two") - common
    assert retry.prefill_s == pytest.approx(0.01 * retry.prefill_tokens)


async def test_append_only_retry_reads_only_what_was_appended() -> None:
    """The final state (prompt + answer) serves a retry whose prompt extends it."""
    clock = FakeClock()
    first_prompt = "attempt 1:"
    retry_tail = first_prompt + "x y" + " feedback; attempt 2:"
    with anyio.fail_after(10):
        async with clock.autojump(), fake_system(SCRIPTS, budget=100, clock=clock) as (sys, fb):
            out = await sys.run_phases(
                "t1", [phase("a", first_prompt), phase("b", "review"), phase("a", retry_tail)]
            )
    assert fb.loads == ["a", "b", "a"]
    retry = out.records[2]
    assert retry.kv_restored_tokens == len(STABLE + first_prompt + "x y")
    assert retry.prefill_tokens == len(" feedback; attempt 2:")


@pytest.mark.parametrize("kv_cache", [True, False])
async def test_servable_tokens_are_what_the_model_read_earlier_in_the_task(
    kv_cache: bool,
) -> None:
    """``kv_servable_tokens``: the prompt's common prefix with what the same model read
    earlier in the same task (prompt and answer); the run's served share is restored over
    servable, 1.0 here with the cache on, 0.0 with it off. Another task's reading does not
    count, nor does another model's."""
    clock = FakeClock()
    first_prompt = "attempt 1:"
    retry_tail = first_prompt + "x y" + " feedback; attempt 2:"
    with anyio.fail_after(10):
        async with (
            clock.autojump(),
            fake_system(SCRIPTS, budget=100, clock=clock, kv_cache=kv_cache) as (sys, _),
        ):
            out = await sys.run_phases(
                "t1", [phase("a", first_prompt), phase("b", "review"), phase("a", retry_tail)]
            )
            other = await sys.run_phases("t2", [phase("a", first_prompt)])
            summary = sys.summary()
    first, review, retry = out.records
    assert (first.kv_servable_tokens, review.kv_servable_tokens) == (0, 0)
    assert retry.kv_servable_tokens == len(STABLE + first_prompt + "x y")
    assert other.records[0].kv_servable_tokens == 0  # t1's reading is not t2's
    assert summary.kv_servable_tokens == retry.kv_servable_tokens
    served = retry.kv_servable_tokens if kv_cache else 0
    assert (summary.kv_served_tokens, summary.kv_served_share) == (served, 1.0 if kv_cache else 0)


async def test_diverging_state_needs_the_minimum_common_prefix() -> None:
    with anyio.fail_after(10):
        async with kvcache() as kv:
            await kv.save(ID, list(range(40)))
            partial = await kv.lookup(ID, [*range(35), 99])
            short = await kv.lookup(ID, [*range(10), 99])
            await kv.save(ID, [1000, 1001])
            whole = await kv.lookup(ID, [1000, 1001, 7])
    assert partial is not None and partial.common_tokens == 35
    assert len(partial.state.tokens) == 40
    assert short is None  # 10 common tokens: below the minimum for a diverging state
    assert whole is not None and whole.common_tokens == 2  # a whole-state match always counts
    assert [e.tokens for e in of(kv.seen, KVHit)] == [35, 2]


@pytest.mark.parametrize("tier", ["ram", "disk"])
async def test_a_model_that_cannot_rewind_gets_the_longest_whole_prefix(
    tmp_path: Path, tier: str
) -> None:
    """A state longer than a model's sliding window cannot be cut back: the lookup offers the
    longest state that is wholly a prefix of the prompt, not a longer diverging one; a
    diverging state that fits in the window is still offered."""
    prompt = [*range(45), 7, 8]
    with anyio.fail_after(10):
        async with kvcache(disk_dir=tmp_path) as old:
            await old.save(ID, list(range(50)))  # diverges after 45 tokens
            await old.save(ID, list(range(20)))  # wholly a prefix
        async with kvcache(disk_dir=tmp_path) as kv:
            if tier == "ram":
                await kv.save(ID, list(range(50)))
                await kv.save(ID, list(range(20)))
            swa = await kv.lookup(ID, prompt, window=32)
            near = await kv.lookup(ID, prompt, window=64)
            full = await kv.lookup(ID, prompt)
    assert swa is not None and swa.common_tokens == 20 and len(swa.state.tokens) == 20
    assert near is not None and near.common_tokens == 45  # 50 tokens fit a window of 64
    assert full is not None and full.common_tokens == 45
    assert swa.tier == tier  # (a disk hit is promoted to RAM for the next lookups)


async def test_a_sliding_window_retry_restores_a_whole_prefix() -> None:
    """Attempt 1's final state diverges from the retry and is longer than the window, so it
    cannot be cut back; the retry restores a state that is wholly a prefix of it (attempt 1's
    prompt but its last token) instead of nothing."""
    clock = FakeClock()
    scripts = {"a": msgspec.structs.replace(SCRIPTS["a"], kv_window=16), "b": SCRIPTS["b"]}
    with anyio.fail_after(10):
        async with clock.autojump(), fake_system(scripts, budget=100, clock=clock) as (sys, _):
            out = await sys.run_phases(
                "t1", [phase("a", "attempt 1"), phase("b", "review"), phase("a", "attempt two")]
            )
    retry = out.records[2]
    assert retry.kv_restored_tokens == retry.kv_servable_tokens == len(STABLE + "attempt ")


async def test_a_sliding_window_retry_restores_the_whole_previous_prompt() -> None:
    """A retry that repeats the previous prompt but not the answer as the model wrote it
    (the final state diverges inside the answer, and is longer than the window) restores
    the previous prompt's state (all but its last token, so that restoring it needs no cut),
    kept beside the final state; so does a repeat of the same prompt."""
    clock = FakeClock()
    scripts = {"a": msgspec.structs.replace(SCRIPTS["a"], kv_window=16), "b": SCRIPTS["b"]}
    first = "attempt 1:"
    with anyio.fail_after(10):
        async with clock.autojump(), fake_system(scripts, budget=100, clock=clock) as (sys, _):
            out = await sys.run_phases(
                "t1",
                [phase("a", first), phase("b", "review"), phase("a", first + "x  y; 2:"),
                 phase("a", first + "x  y; 2:")],
            )  # fmt: skip
    retry, repeat = out.records[2:]
    assert retry.kv_restored_tokens == len(STABLE + first) - 1  # not just STABLE
    assert retry.kv_servable_tokens == len(STABLE + first + "x ")
    assert repeat.kv_restored_tokens == repeat.prompt_tokens - 1  # the same prompt again


async def test_diverging_state_is_found_on_disk_by_a_fresh_store(tmp_path: Path) -> None:
    with anyio.fail_after(10):
        async with kvcache(disk_dir=tmp_path) as old:
            await old.save(ID, list(range(50)))
            await old.save(ID, list(range(20)))
        async with kvcache(disk_dir=tmp_path) as kv:
            hit = await kv.lookup(ID, [*range(45), 7, 8])
    assert hit is not None and hit.tier == "disk"
    assert hit.common_tokens == 45 and len(hit.state.tokens) == 50


async def test_a_restore_the_backend_cannot_use_is_one_lookup_counted_as_a_miss() -> None:
    clock = FakeClock()
    scripts = {"a": msgspec.structs.replace(SCRIPTS["a"], fail_restore=True)}
    backend = FakeBackend(clock, scripts)
    specs = {"a": ModelSpec(name="a", path="/nonexistent/a.gguf")}
    seen: list[AnyEvent] = []
    with anyio.fail_after(10):
        async with clock.autojump(), open_system(
            fake_profile(["a"]), backend=backend, specs=specs, clock=clock, budget_bytes=200,
            on_event=seen.append,
        ) as sys:  # fmt: skip
            out = await sys.run_phases("t1", [phase("a", "attempt 1"), phase("a", "attempt 2")])
    assert [r.kv_restored_tokens for r in out.records] == [0, 0]
    assert len(of(seen, KVHit)) == 1  # the second lookup offered attempt 1's state
    assert [e.reason for e in of(seen, KVMiss)] == ["no saved prefix"]  # the first lookup
    (failed,) = of(seen, KVRestoreFailed)
    assert failed.phase_id == out.records[1].phase_id and failed.tokens > 0
    summary = sys.summary()
    assert (summary.kv_hits, summary.kv_misses) == (0, 2)  # two lookups, none restored


@asynccontextmanager
async def system_on_disk(clock: FakeClock, disk: Path, n_ctx: int = 2048) -> AsyncIterator[Any]:
    backend = FakeBackend(clock, SCRIPTS)
    specs = {n: ModelSpec(name=n, path=f"/nonexistent/{n}.gguf", n_ctx=n_ctx) for n in SCRIPTS}
    seen: list[AnyEvent] = []
    profile = fake_profile(list(SCRIPTS))
    async with open_system(
        profile, backend=backend, specs=specs, clock=clock, budget_bytes=200, kv_disk_dir=disk,
        on_event=seen.append,
    ) as sys:  # fmt: skip
        yield sys, seen


async def test_disk_state_serves_a_later_system_with_same_model_only(tmp_path: Path) -> None:
    clock = FakeClock()
    with anyio.fail_after(10):
        async with clock.autojump():
            async with system_on_disk(clock, tmp_path) as (sys, _):
                await sys.run_phases("t1", [phase("a", "attempt 1")])
            async with system_on_disk(clock, tmp_path) as (sys, seen):
                later = await sys.run_phases("t2", [phase("a", "attempt 2")])
            async with system_on_disk(clock, tmp_path, n_ctx=4096) as (sys, seen_ctx):
                other = await sys.run_phases("t3", [phase("a", "attempt 3")])
    assert later.records[0].kv_restored_tokens == len(STABLE)
    assert [e.tier for e in of(seen, KVHit)] == ["disk"]
    assert other.records[0].kv_restored_tokens == 0
    assert of(seen_ctx, KVHit) == [] and len(of(seen_ctx, KVMiss)) == 1


async def test_cache_off_writes_nothing_to_disk(tmp_path: Path) -> None:
    clock = FakeClock()
    with anyio.fail_after(10):
        system = fake_system(SCRIPTS, budget=200, clock=clock, kv_cache=False, kv_disk_dir=tmp_path)
        async with clock.autojump(), system as (sys, _):
            out = await sys.run_phases("t1", [phase("a", "1"), phase("a", "2")])
    assert [r.kv_restored_tokens for r in out.records] == [0, 0]
    assert disk_bytes(tmp_path) == 0 and not any(tmp_path.iterdir())  # noqa: ASYNC240


async def test_the_heap_is_given_back_after_enough_dropped_states() -> None:
    trims: list[int] = []
    async with kvcache(
        budget=250, trim_after_bytes=200, release_heap=lambda: trims.append(1)
    ) as kv:
        for i in range(2):
            await kv.save(ID, [i, 1, 2], size=100)  # fits: nothing dropped
        await kv.lookup(ID, [9])  # a round trip: the saves were handled
        assert trims == []
        await kv.save(ID, [2, 1, 2], size=100)  # drops 100 bytes: under the threshold
        await kv.lookup(ID, [9])
        assert trims == []
        await kv.save(ID, [3, 1, 2], size=100)  # 200 bytes dropped: trim once
        await kv.save(ID, [4, 1, 2], size=100)  # the count starts again
        await kv.lookup(ID, [9])
        assert trims == [1]
    dropped = [e for e in kv.seen if isinstance(e, KVDropped)]
    assert [e.nbytes for e in dropped] == [100, 100, 100]
