"""Running a prepared request: its model's turn in the queues, then one phase.

A request waits for its model's turn in the :class:`~swapos.serve.scheduler.Scheduler`,
and runs as one phase of its own task in the event log (:meth:`System.generate
<swapos.actors.system.System.generate>`), with the queued and predicted models as the
schedule after it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from swapos.actors.loader import CONTEXT_TOO_BIG
from swapos.actors.system import PhasesOutcome
from swapos.messages.commands import PhaseSpec
from swapos.records.schema import PhaseRecord
from swapos.serve.completions import Prepared
from swapos.serve.errors import RequestError
from swapos.serve.scheduler import Ticket
from swapos.serve.state import Server

Queued = Callable[[Ticket], None]
"""Told the request's ticket once it is in its model's queue."""


@dataclass(frozen=True)
class Ran:
    """What running a request produced."""

    task_id: str
    record: PhaseRecord
    text: str
    error: str | None
    queue_wait_s: float
    predicted: str | None


async def run(
    server: Server,
    prep: Prepared,
    task_id: str,
    on_token: Callable[[str], None] | None = None,
    queued: Queued | None = None,
) -> Ran:
    """Queue ``prep`` for its model's turn and run it as one phase (task ``task_id``);
    ``queued`` is told its ticket once it is queued.

    Cancelled (the client went away), the request leaves its queue or stops its generation
    within a token; its turn and lease are released at once and the cancellation propagates.
    """
    server.next_models.arrived(prep.key, prep.model)
    queue_wait = 0.0
    try:
        turn = server.scheduler.turn(prep.model, request_id=task_id, queued=queued)
        async with turn as ticket:
            queue_wait = ticket.queue_wait_s
            waiting = server.scheduler.queued_models(exclude=prep.model)
            then = server.next_models.upcoming(prep.key, prep.model, waiting)
            outcome: PhasesOutcome = await server.system.generate(
                task_id,
                PhaseSpec(
                    phase=prep.kind,
                    model=prep.model,
                    prompt=prep.prompt,
                    stable_prefix=prep.stable_prefix,
                    params=prep.params,
                    special=prep.special,
                    n_ctx=prep.n_ctx,
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
    server.expiry.finished(prep.model)  # the model's ttl, if it has one
    return Ran(
        task_id=task_id,
        record=record,
        text=outcome.outputs[0] if outcome.outputs else "",
        error=outcome.error,
        queue_wait_s=queue_wait,
        predicted=server.next_models.predict(prep.key, prep.model),
    )


async def run_streamed(
    server: Server,
    prep: Prepared,
    task_id: str,
    each: Callable[[str], Awaitable[None]],
    queued: Queued | None = None,
) -> Ran:
    """:func:`run`, handing each decoded piece to ``each`` as it comes (a streamed answer:
    ``each`` sends it). Pieces are relayed through a bounded stream sized to the answer, so
    a slow client never stalls the decode loop."""
    send, recv = anyio.create_memory_object_stream[str](prep.params.max_tokens + 8)
    ran: Ran | None = None

    def tap(piece: str) -> None:  # closed: the request has ended; broken: its reader has
        with contextlib.suppress(
            anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.WouldBlock
        ):
            send.send_nowait(piece)

    async def generate() -> None:
        nonlocal ran
        with send:
            ran = await run(server, prep, task_id, on_token=tap, queued=queued)

    async with anyio.create_task_group() as tg:
        tg.start_soon(generate)
        with recv:
            async for piece in recv:
                await each(piece)
    assert ran is not None
    return ran


def failure(ran: Ran) -> RequestError:
    """The error a failed phase is reported as."""
    reason = ran.error or "unknown error"
    if "does not fit n_ctx" in reason or CONTEXT_TOO_BIG in reason:
        return RequestError(400, reason, param="messages", code="context_length_exceeded")
    if "could not compile the grammar" in reason:  # a schema check should have caught it
        return RequestError(400, reason, param="response_format")
    return RequestError(500, f"generation failed: {reason}", kind="server_error")
