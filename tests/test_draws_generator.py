"""The Generator's draws on the fake backend and the FakeClock: each draw replied as it ends,
``StopDraws`` drops the rest, groups of ``side_by_side``, in turn where the model cannot."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from swapos.actors.base import Events, Outbox
from swapos.actors.generator import Generator
from swapos.actors.residency import Residency
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_model import FakeModel
from swapos.backends.fake_script import FakeModelScript
from swapos.data.sampling import SamplingParams
from swapos.messages.commands import (
    CancelGeneration,
    DrawFinished,
    DrawsDone,
    DrawSpec,
    GenerateDraws,
    GenerateFailed,
    StopDraws,
)
from swapos.messages.events import GenerationFailed, GenerationFinished, GenerationStarted
from swapos.models.spec import ModelSpec
from swapos.testing import FakeClock

REPLIES = ("a b c d e f", "one two", "x y z w", "p q r s t u v")  # 6, 2, 4, 7 tokens


@dataclass
class Rig:
    clock: FakeClock
    model: FakeModel
    inbox: MemoryObjectSendStream[Any]
    replies: MemoryObjectReceiveStream[Any]
    events: list[Any] = field(default_factory=list)

    async def ask(self, req: GenerateDraws) -> list[Any]:
        """Send ``req``; every reply up to its ``DrawsDone`` or ``GenerateFailed``, each with
        the clock's time when it came."""
        await self.inbox.send(req)
        got: list[Any] = []
        async for msg in self.replies:
            got.append((self.clock.now(), msg))
            if isinstance(msg, DrawsDone | GenerateFailed):
                return got
        raise AssertionError("the Generator's outbox closed")


@asynccontextmanager
async def rig(**script: Any) -> AsyncIterator[Rig]:
    clock = FakeClock()
    async with clock.autojump():
        backend = FakeBackend(
            clock, {"m": FakeModelScript(replies=REPLIES, token_s=0.1, load_s=0.0, **script)}
        )
        model = await backend.load(ModelSpec(name="m", path="/dev/null"))
        residency = Residency()
        residency.add("L1", model)
        send_in, recv_in = anyio.create_memory_object_stream[Any](32)
        send_router, recv_router = anyio.create_memory_object_stream[Any](32)
        send_rec, recv_rec = anyio.create_memory_object_stream[Any](4096)
        send_kv, recv_kv = anyio.create_memory_object_stream[Any](32)
        send_pf, recv_pf = anyio.create_memory_object_stream[Any](32)
        outbox = Outbox(
            {"router": send_router, "recorder": send_rec, "kvcache": send_kv, "prefetcher": send_pf}
        )
        gen = Generator(
            inbox=recv_in, outbox=outbox, events=Events(outbox, clock, 0.0), residency=residency,
            use_kv_cache=False,
        )  # fmt: skip
        the_rig = Rig(clock, model, send_in, recv_router)

        async def record() -> None:
            async with recv_rec:
                async for ev in recv_rec:
                    the_rig.events.append(ev)

        async with anyio.create_task_group() as tg, recv_router, recv_kv, recv_pf:
            tg.start_soon(record)
            await tg.start(gen.run)
            async with send_in:
                yield the_rig
        await model.close()


def request(n: int = 4, *, side_by_side: int = 0, max_tokens: int = 10) -> GenerateDraws:
    return GenerateDraws(
        request_id="d1",
        reply_to="router",
        lease_id="L1",
        model="m",
        prompt="fix it",
        task_id="t",
        side_by_side=side_by_side,
        draws=[
            DrawSpec(
                params=SamplingParams(max_tokens=max_tokens, temperature=0.8, seed=i),
                phase_id=f"ph-{i}",
            )
            for i in range(n)
        ],
    )


async def test_each_draw_is_replied_as_it_ends_while_the_others_go_on() -> None:
    with anyio.fail_after(5):
        async with rig() as r:
            got = await r.ask(request())
    draws = [(t, m) for t, m in got if isinstance(m, DrawFinished)]
    assert [m.index for _, m in draws] == [1, 2, 0, 3]  # 2, 4, 6, 7 tokens: shortest first
    assert [t for t, _ in draws] == pytest.approx([0.2, 0.4, 0.6, 0.7])
    assert [m.text for _, m in draws] == [REPLIES[i] for i in (1, 2, 0, 3)]
    done = got[-1][1]
    assert isinstance(done, DrawsDone)
    assert (done.finished, done.stopped, done.side_by_side) == ([1, 2, 0, 3], [], 4)
    finished = [e for e in r.events if isinstance(e, GenerationFinished)]
    assert [e.phase_id for e in finished] == ["ph-1", "ph-2", "ph-0", "ph-3"]
    assert len({e.request_id for e in finished}) == 4
    assert len([e for e in r.events if isinstance(e, GenerationStarted)]) == 4


async def test_stop_draws_drops_the_draws_still_running_within_one_step() -> None:
    with anyio.fail_after(5):
        async with rig() as r:
            await r.inbox.send(request())
            first = await r.replies.receive()
            assert isinstance(first, DrawFinished)
            assert first.index == 1
            await r.inbox.send(StopDraws(request_id="d1"))
            rest = []
            async for msg in r.replies:
                rest.append((r.clock.now(), msg))
                if isinstance(msg, DrawsDone):
                    break
    t, done = rest[-1]
    assert isinstance(done, DrawsDone)
    assert t == pytest.approx(0.3)  # the step running when it came ends; no other starts
    assert done.finished == [1]
    assert done.stopped == [0, 2, 3]
    failed = [e for e in r.events if isinstance(e, GenerationFailed)]
    assert sorted(e.phase_id for e in failed) == ["ph-0", "ph-2", "ph-3"]
    assert {e.reason for e in failed} == {"stopped"}


async def test_groups_of_side_by_side_run_one_after_another_and_stop_between() -> None:
    with anyio.fail_after(5):
        async with rig() as r:
            got = await r.ask(request(side_by_side=2))
    draws = [(t, m.index) for t, m in got if isinstance(m, DrawFinished)]
    # group 1 (6 and 2 tokens) ends at 0.6, group 2 (4 and 7) runs 0.6..1.3
    assert draws == [(pytest.approx(0.2), 1), (pytest.approx(0.6), 0),
                     (pytest.approx(1.0), 2), (pytest.approx(1.3), 3)]  # fmt: skip
    assert got[-1][1].side_by_side == 2


async def test_in_turn_draws_say_what_side_by_side_draws_say() -> None:
    with anyio.fail_after(5):
        async with rig() as r:
            side = await r.ask(request())
        async with rig() as r:
            turn = await r.ask(request(side_by_side=1))
    texts = {m.index: m.text for _, m in side if isinstance(m, DrawFinished)}
    in_turn = [(t, m.index, m.text) for t, m in turn if isinstance(m, DrawFinished)]
    assert [(i, text) for _, i, text in in_turn] == sorted(texts.items())
    assert [t for t, _, _ in in_turn] == pytest.approx([0.6, 0.8, 1.2, 1.9])
    assert turn[-1][1].side_by_side == 1


async def test_the_scripted_cost_curve_sets_the_step_time() -> None:
    with anyio.fail_after(5):
        async with rig(draw_step_cost=(1.0, 1.5, 2.0, 3.0)) as r:
            got = await r.ask(request())
    assert got[-2][0] == pytest.approx(0.3 * 2 + 0.2 * 2 + 0.15 * 2 + 0.1)


async def test_cancel_generation_fails_the_request_and_logs_the_unfinished_draws() -> None:
    with anyio.fail_after(5):
        async with rig() as r:
            await r.inbox.send(request())
            first = await r.replies.receive()
            assert isinstance(first, DrawFinished)
            await r.inbox.send(CancelGeneration(request_id="d1"))
            failed = await r.replies.receive()
            assert r.clock.now() == pytest.approx(0.2)
    assert isinstance(failed, GenerateFailed)
    assert failed.reason == "cancelled"
    cancelled = [e for e in r.events if isinstance(e, GenerationFailed)]
    assert sorted(e.phase_id for e in cancelled) == ["ph-0", "ph-2", "ph-3"]


async def test_a_lease_not_held_is_a_failed_reply() -> None:
    with anyio.fail_after(5):
        async with rig() as r:
            req = request()
            got = await r.ask(GenerateDraws(**{**_fields(req), "lease_id": "nope"}))
    assert isinstance(got[-1][1], GenerateFailed)
    assert "not held" in got[-1][1].reason


def _fields(msg: GenerateDraws) -> dict[str, Any]:
    return {f: getattr(msg, f) for f in msg.__struct_fields__}
