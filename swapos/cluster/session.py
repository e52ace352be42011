"""``bench run --ray``: connect to Ray, start the pool, run the driver, clean up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from swapos.bench.compare import Key
from swapos.bench.suite.arms import SystemFactory
from swapos.bench.suite.progress import Reporter
from swapos.cluster.driver import ClusterReport, run_cluster
from swapos.cluster.ray_pool import RayPool, connect, import_ray
from swapos.data.task import Task
from swapos.models.profile import Profile
from swapos.records.schema import RunSummary


async def run_on_ray(
    tasks: Sequence[Task],
    profile: Profile,
    *,
    address: str | None,
    workers: int | None,
    out: Path,
    modes: Sequence[str],
    arms: Sequence[str],
    max_attempts: int | None = None,
    resume: bool = False,
    shared_logs: bool = False,
    reporter: Reporter | None = None,
    factory: SystemFactory | None = None,
    options: Mapping[str, Any] | None = None,
) -> tuple[dict[Key, RunSummary], ClusterReport]:
    """:func:`~swapos.cluster.driver.run_cluster` on Ray at ``address`` (see
    :func:`~swapos.cluster.ray_pool.connect`) with ``workers`` workers (None: one per node).

    Every actor this call started is killed on the way out (also on error or
    cancellation), and Ray is shut down if this call started it.
    """
    started = await anyio.to_thread.run_sync(connect, address)
    pool = RayPool(workers=workers, factory=factory, options=options)
    try:
        return await run_cluster(
            tasks,
            profile,
            out=out,
            modes=modes,
            arms=arms,
            pool=pool,
            max_attempts=max_attempts,
            resume=resume,
            shared_logs=shared_logs,
            reporter=reporter,
        )
    finally:
        pool.shutdown()
        if started:
            import_ray().shutdown()
