"""The fleet's shared state: the learned transitions and every replica's last report.

One per fleet (a Ray Serve deployment of one replica, :mod:`swapos.cluster.ray_fleet`). The
replicas send it their requests' model sequence, in batches, and pull the counts back, so
each replica prefetches what the fleet's clients ask next, not only its own; they send it
their residency reports, which the front reads to route a conversation to the replica that
holds it. Its methods take and return msgpack bytes (:mod:`swapos.cluster.fleet_protocol`);
it holds nothing a restart cannot rebuild (a new one learns again and is reported to again
within a second).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from swapos.cluster.fleet_protocol import (
    OBSERVATIONS,
    REPORT,
    FleetView,
    ReplicaReport,
    ReplicaSeen,
    encode,
)
from swapos.policies.serving import Transitions

STALE_S = 5.0
"""A replica that has not reported for this long is taken for dead (they report every
:data:`~swapos.cluster.fleet_replica.HEARTBEAT_S`)."""


class FleetState:
    """The shared transitions and the replicas' reports.

    Args:
        clock: wall-clock seconds (replaced in tests).
        stale_s: see :data:`STALE_S`.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, stale_s: float = STALE_S):
        self._clock = clock
        self._stale_s = stale_s
        self._transitions = Transitions()
        self._observations = 0
        self._reports: dict[str, tuple[ReplicaReport, float]] = {}

    async def observe(self, batch: bytes) -> None:
        """Requests' (client, model) pairs, in the order a replica saw them."""
        for obs in OBSERVATIONS.decode(batch):
            self._transitions.observe(obs.key, obs.model)
            self._observations += 1

    async def transitions(self) -> bytes:
        """The counts so far (``Transitions.counts``)."""
        return encode(self._transitions.counts())

    async def report(self, data: bytes) -> None:
        """A replica's report (it replaces that replica's last one)."""
        report = REPORT.decode(data)
        self._reports[report.replica] = (report, self._clock())

    async def forget(self, replica: str) -> None:
        """Drop a replica that stopped (its report no longer routes anything)."""
        self._reports.pop(replica, None)

    async def view(self) -> bytes:
        """The encoded :class:`FleetView`."""
        return encode(self.snapshot())

    def snapshot(self) -> FleetView:
        """Every replica's last report with its age; live ones first, by name."""
        now = self._clock()
        seen = [
            ReplicaSeen(report=r, age_s=now - at, live=now - at <= self._stale_s)
            for r, at in self._reports.values()
        ]
        seen.sort(key=lambda s: (not s.live, s.report.replica))
        return FleetView(replicas=seen, observations=self._observations)
