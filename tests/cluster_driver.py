"""A driver process for the resume test: ``python -m tests.cluster_driver ADDRESS OUT N``.

Runs the first N tasks of the fake-backend suite of :mod:`tests.test_cluster_ray` on the
Ray cluster at ADDRESS until it ends or is killed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from swapos.cluster.session import run_on_ray
from tests.cluster_fakes import RAY_OPTIONS, FakeFactory, task
from tests.fakes import pipeline_profile as profile


async def main(address: str, out: Path, n: int) -> None:
    await run_on_ray(
        [task(i) for i in range(n)], profile(), address=address, workers=2, out=out,
        modes=["overlap"], arms=["pipeline", "single"], factory=FakeFactory(),
        options=RAY_OPTIONS,
    )  # fmt: skip


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))
