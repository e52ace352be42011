"""The Evictor: decides which models must go to make room, by their next use."""

from __future__ import annotations

from typing import assert_never

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.base import Outbox, serving
from swapos.messages.commands import PlanRoom, RoomPlanned, ScheduleUpdated
from swapos.messages.inboxes import EvictorInbox
from swapos.policies.eviction import EvictionRule, plan_room


class EvictorStatistics(msgspec.Struct, frozen=True, kw_only=True):
    plans: int
    no_room: int


class Evictor:
    """Answers :class:`PlanRoom` with :func:`swapos.policies.eviction.plan_room` under its
    rule, over the ledger snapshot in the request (host and device claims, under both
    budgets) and the last published schedule.

    It owns what only eviction needs (the rule and the schedule) and no copy of residency:
    the Loader owns the ledger and the budget, sends them with each question and checks the
    plan against the ledger before acting, so there is nothing to keep in step or to undo.
    """

    def __init__(
        self,
        *,
        inbox: MemoryObjectReceiveStream[EvictorInbox],
        outbox: Outbox,
        rule: EvictionRule = "next_use",
    ) -> None:
        self._inbox = inbox
        self._outbox = outbox
        self._rule = rule
        self._schedule: list[str] = []
        self._plans = self._no_room = 0

    def statistics(self) -> EvictorStatistics:
        return EvictorStatistics(
            plans=self._plans,
            no_room=self._no_room,
        )

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve the inbox until it closes. Cancellation stops it at once (no cleanup)."""
        async with serving(self._inbox, self._outbox):
            task_status.started()
            async for msg in self._inbox:
                await self._handle(msg)

    async def _handle(self, msg: EvictorInbox) -> None:
        match msg:
            case PlanRoom():
                plan = plan_room(
                    msg.claims,
                    model=msg.model,
                    nbytes=msg.nbytes,
                    budget=msg.budget_bytes,
                    urgent=msg.urgent,
                    schedule=self._schedule,
                    rule=self._rule,
                    device_nbytes=msg.device_nbytes,
                    device_budget=msg.device_budget_bytes,
                )
                self._plans += 1
                self._no_room += plan is None
                await self._outbox.send(
                    msg.reply_to,
                    RoomPlanned(request_id=msg.request_id, model=msg.model, plan=plan),
                )
            case ScheduleUpdated(uses=uses):
                self._schedule = [u.model for u in sorted(uses, key=lambda u: u.order)]
            case _:
                assert_never(msg)
