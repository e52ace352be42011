"""The Router's schedules: each run's upcoming model uses, published to the Evictor and the
Prefetcher (and logged) as one merged schedule."""

from __future__ import annotations

import msgspec

from swapos.actors.base import Events, Outbox
from swapos.messages.commands import ModelUse, ScheduleUpdated
from swapos.messages.events import SchedulePublished


class Schedules:
    """Upcoming model uses by run id, and the announced next task's first use of a run.

    Owned by the Router (one coroutine per run writes only its own entry); publishing sends
    the merged schedule of every run.
    """

    def __init__(self, outbox: Outbox, events: Events) -> None:
        self._outbox = outbox
        self.events = events
        self._schedules: dict[str, list[ModelUse]] = {}
        self._announced: dict[str, ModelUse] = {}

    def announce(self, run_id: str, first_use: ModelUse) -> None:
        """The run ``run_id`` will be followed by a task whose first use is ``first_use``."""
        self._announced[run_id] = first_use

    async def publish(self, run_id: str, schedule: list[ModelUse]) -> None:
        """Before the lease the Evictor learns the schedule (for its victim choice). An
        announced next task's first use follows the task's own. Schedules are kept by run
        (``run_id``)."""
        uses = self._store(run_id, schedule)
        await self._outbox.send("evictor", ScheduleUpdated(uses=uses))

    async def ready(self, run_id: str, schedule: list[ModelUse]) -> ScheduleUpdated:
        """The lease is held: the same schedule for the Prefetcher (logged now as
        ``SchedulePublished``). The Router has the Generator send it at the phase's first
        token, so a speculative load competes neither with the phase's own load nor with
        its prefill (on a small CPU box a load beside a prefill slows the prefill ~1.5-2x)."""
        uses = self._store(run_id, schedule)
        await self._emit(schedule[0].task_id, uses)
        return ScheduleUpdated(uses=uses)

    def _store(self, run_id: str, schedule: list[ModelUse]) -> list[ModelUse]:
        """Keep ``run_id``'s schedule (the announced next task's first use appended); every
        run's uses, merged."""
        after = self._announced.get(run_id)
        if after is not None:
            schedule = [*schedule, msgspec.structs.replace(after, order=len(schedule))]
        self._schedules[run_id] = schedule
        return [u for s in self._schedules.values() for u in s]

    async def _emit(self, task_id: str, uses: list[ModelUse]) -> None:
        models = [u.model for u in sorted(uses, key=lambda u: u.order)]
        await self.events.emit(SchedulePublished(t=self.events.t(), task_id=task_id, models=models))

    async def publish_rest(self, run_id: str) -> None:
        """A grade starts: the generate phase before it is over. For a task whose next task
        was announced, the rest of its schedule (its later phases, then the next task's
        first use) goes to the Evictor and the Prefetcher, so the next model can come in
        while the grade runs. Other tasks publish nothing here (unchanged behaviour)."""
        schedule = self._schedules.get(run_id)
        if run_id not in self._announced or not schedule:
            return
        rest = [u for u in schedule if u.order > 0]
        self._schedules[run_id] = rest
        uses = [u for s in self._schedules.values() for u in s]
        await self._outbox.send("evictor", ScheduleUpdated(uses=uses))
        await self._outbox.send("prefetcher", ScheduleUpdated(uses=uses))
        await self._emit(schedule[0].task_id, uses)

    async def forget(self, run_id: str) -> None:
        """The run ended: its uses leave the schedule."""
        self._announced.pop(run_id, None)
        if self._schedules.pop(run_id, None) is not None:
            uses = [u for s in self._schedules.values() for u in s]
            await self._outbox.send_if_open("evictor", ScheduleUpdated(uses=uses))
