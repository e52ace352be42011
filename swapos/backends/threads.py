"""Running blocking model work in worker threads, cancellably.

A llama.cpp call cannot be interrupted from outside, but it can be asked to stop: loads take a
progress callback that may return ``False``, and our decode loop checks a flag between tokens.
:func:`run_in_worker` ties that flag to anyio cancellation: when the awaiting task is
cancelled, the flag is set, the worker is *waited for* (so the model is never closed under a
running thread), and the cancellation is re-raised.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread

T = TypeVar("T")


async def run_in_worker(
    fn: Callable[[threading.Event], T],
    *,
    limiter: anyio.CapacityLimiter | None = None,
) -> T:
    """Run ``fn(abort)`` in a worker thread; set ``abort`` if this task is cancelled.

    Args:
        fn: the blocking work. It must poll ``abort`` often (between tokens, in a load
            progress callback) and return or raise soon after it is set.
        limiter: bounds how many such workers run at once.

    Returns:
        What ``fn`` returned.

    Raises:
        Whatever ``fn`` raised; on cancellation, the cancellation, once the worker has
        stopped.
    """
    abort = threading.Event()
    result: list[T] = []
    error: list[BaseException] = []

    async def work(scope: anyio.CancelScope) -> None:
        try:
            result.append(await anyio.to_thread.run_sync(fn, abort, limiter=limiter))
        except Exception as exc:  # re-raised below, outside the task group
            error.append(exc)
        finally:
            scope.cancel()

    async def watch() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            abort.set()

    async with anyio.create_task_group() as tg:
        # The worker runs shielded: cancellation reaches it only through ``abort``.
        shield = anyio.CancelScope(shield=True)

        async def shielded_work() -> None:
            with shield:
                await work(tg.cancel_scope)

        tg.start_soon(watch)
        tg.start_soon(shielded_work)
    if error:
        raise error[0]
    return result[0]


def on_event_loop(on_token: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """``on_token`` called on the event loop thread from this anyio worker thread."""
    if on_token is None:
        return None

    def emit(text: str) -> None:
        anyio.from_thread.run_sync(on_token, text)

    return emit
