"""``python -m swapos.bench.soak_slots.fake_serve``: ``swapos serve`` on the fake backend, for
``bench soak-slots --fake`` (and its test).

The same app, scheduler, actors and event log as ``python -m swapos.serve``; only the model
is scripted (:class:`~swapos.backends.fake.FakeBackend` on the real clock): one model that
answers :data:`REPLY` at :data:`TOKEN_S` a token, with ``--slots`` slots, preloaded.
SIGINT or SIGTERM stops it as they stop ``swapos serve`` (running requests finish within
Hypercorn's graceful timeout, then the system closes and the event log is flushed).
"""

from __future__ import annotations

import argparse
import signal
import sys
from functools import partial
from pathlib import Path

import anyio

from swapos.actors.system import open_system
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.clock import MonotonicClock
from swapos.models.profile import ModelConfig, Profile
from swapos.models.spec import ModelSpec
from swapos.serve.app import app
from swapos.serve.hosting import listening_socket, serve_http
from swapos.serve.state import ServeSettings

REPLY = " ".join(f"w{i}" for i in range(256))
"""What the fake model answers, one token a word (``max_tokens`` cuts it)."""
TOKEN_S = 0.004
"""Seconds per decode step of the fake model."""
STEP_COST = (1.0, 1.3, 1.6, 1.9, 2.2, 2.5, 2.8, 3.1)
"""The fake model's cost curve: a step of ``k`` slots costs ``STEP_COST[k - 1]`` x ``TOKEN_S``."""


class RealClock(MonotonicClock):
    """The real clock, whose sleep of a moment already past returns at once: the fake's
    lockstep steps sleep until an instant computed earlier (exact on a ``FakeClock``, a
    little behind on the real one; :func:`anyio.sleep` refuses a negative delay)."""

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(max(0.0, seconds))


def fake_model(name: str, slots: int) -> tuple[Profile, dict[str, ModelSpec], FakeBackend]:
    """A one-model profile, its spec with ``slots`` slots, and the fake backend playing it."""
    path = f"/nonexistent/{name}.gguf"
    profile = Profile(
        name=f"soak-slots-fake: {name}",
        budget=2**40,
        mode="resident",
        models={name: ModelConfig(path=path, n_ctx=4096)},
    )
    script = FakeModelScript(
        load_s=0.05, token_s=TOKEN_S, reply=REPLY, footprint_bytes=2**20, draw_step_cost=STEP_COST
    )
    backend = FakeBackend(RealClock(), {name: script})
    specs = {name: ModelSpec(name=name, path=path, n_ctx=4096, slots=slots)}
    return profile, specs, backend


async def serve(model: str, slots: int, port: int, event_log: Path) -> None:
    """Serve the fake ``model`` on loopback ``port`` until SIGINT or SIGTERM."""
    profile, specs, backend = fake_model(model, slots)
    bind, _ = listening_socket("127.0.0.1", port)
    async with open_system(
        profile, backend=backend, specs=specs, event_log=event_log, kv_disk_dir=None
    ) as system:
        asgi = app(system, ServeSettings(slots=slots))
        failed = await system.preload([model])
        if failed:
            raise SystemExit(f"preload failed: {failed}")
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signal, stop)
            print(f"fake swapos serve on 127.0.0.1:{port}", file=sys.stderr, flush=True)

            async def http() -> None:  # a child task, as in swapos.serve.cli: Hypercorn's
                # asyncio TaskGroup cancels its parent task on shutdown
                await serve_http(asgi, bind=bind, shutdown_trigger=stop.wait)
                tg.cancel_scope.cancel()

            tg.start_soon(http)


async def _stop_on_signal(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            stop.set()
            return


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m swapos.bench.soak_slots.fake_serve")
    p.add_argument("--model", default="small")
    p.add_argument("--slots", type=int, default=8)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--event-log", type=Path, required=True)
    args = p.parse_args(argv)
    anyio.run(partial(serve, args.model, args.slots, args.port, args.event_log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
