"""``python -m swapos.bench ray-overhead``: what Ray adds per task, on the fake backend.

The same suite (default: the first 6 builtin tasks, ``overlap`` mode, ``pipeline`` arm) runs
once in one local process (:func:`~swapos.bench.suite.session.run_bench`) and once on Ray with
``--workers`` workers (default 2; a local Ray gets the machine's CPUs, so on 2 cores: 2
workers of 1 CPU). Models are fake (scripted load and token times on the real clock), so
what is measured is the machinery, not llama.cpp; the grader is real (each grade is a
sandboxed pytest run).

Ray's overhead per task is measured directly, per task, by the driver
(:attr:`~swapos.cluster.driver.ClusterReport.overhead_s`): from handing the task to a worker
to receiving its last result, minus the worker's own time in ``run_task``. That is the
scheduling, the (de)serialization and transfer of the task and its results, and the hops
between Ray's thread and the worker's event loop. The target (issue 12) is a median
<= 50 ms. The pass/fail of every task is compared between the two runs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import msgspec

from swapos.actors.system import System, open_system
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.bench.compare import Key
from swapos.bench.results import write_atomic
from swapos.bench.suite.session import run_bench
from swapos.cliargs import positive_int
from swapos.clock import MonotonicClock
from swapos.models.profile import Mode, ModelConfig, PipelineConfig, Profile
from swapos.models.spec import ModelSpec
from swapos.pipeline.tasks import load_suite
from swapos.records.schema import RunSummary

TARGET_S = 0.050
"""Issue 12: Ray's overhead per task, median."""

SCRIPTS = {
    "planner": FakeModelScript(load_s=0.05, token_s=0.002, reply="Fix the function.\n\n"),
    "coder": FakeModelScript(load_s=0.05, token_s=0.002, reply="def f():\n    return 1\n```"),
    "fixer": FakeModelScript(load_s=0.05, token_s=0.002, reply="def f():\n    return 2\n```"),
}
"""Fake models on the real clock. Their answers solve no task, so every task fails (the
same way in both runs): a second attempt, the fixer's, follows each first grade."""


def fake_profile() -> Profile:
    return Profile(
        name="fake",
        budget=1000,
        models={n: ModelConfig(path=f"/fake/{n}.gguf", n_ctx=4096) for n in SCRIPTS},
        roles={"reason": "planner", "code": "coder", "fix": "fixer"},
        pipeline=PipelineConfig(
            max_attempts=2, skip_reason_max_difficulty=0, resamples=2, draws=0, second_opinion=False
        ),
    )


@dataclass(frozen=True)
class FakeModels:
    """A system factory on the fake backend and the real clock (importable on Ray workers)."""

    @asynccontextmanager
    async def __call__(self, profile: Profile, mode: Mode, events: Path) -> AsyncIterator[System]:
        clock = MonotonicClock()
        specs = {n: ModelSpec(name=n, path=f"/fake/{n}.gguf") for n in SCRIPTS}
        backend = FakeBackend(clock, SCRIPTS)
        async with open_system(
            profile, backend=backend, specs=specs, clock=clock, mode=mode, event_log=events,
            budget_bytes=250,
        ) as system:  # fmt: skip
            yield system


class OverheadReport(msgspec.Struct, kw_only=True):
    """What ``ray-overhead`` measured (seconds). ``ray_wall_s``: the whole Ray run;
    ``ray_setup_s``: the part of it outside the driver (``ray.init`` of a local Ray and
    ``ray.shutdown``); starting the workers is inside the driver's time."""

    tasks: list[str]
    workers: int
    overhead_s: list[float]
    median_overhead_s: float
    target_s: float
    met: bool
    local_wall_s: float
    ray_wall_s: float
    ray_setup_s: float
    passed_local: dict[str, bool]
    passed_ray: dict[str, bool]
    identical_pass_fail: bool
    tasks_per_worker: dict[str, int]


async def measure(
    *, suite: str, limit: int, workers: int, address: str | None, out: Path
) -> OverheadReport:
    """Run the suite locally, then on Ray, and compare (see the module docstring)."""
    from swapos.cluster.session import run_on_ray

    tasks = load_suite(suite, limit=limit)
    profile, factory = fake_profile(), FakeModels()
    modes, arms = ["overlap"], ["pipeline"]
    t0 = time.perf_counter()
    local = await run_bench(
        tasks, profile, out=out / "local", factory=factory, modes=modes, arms=arms
    )
    local_wall = time.perf_counter() - t0
    t0 = time.perf_counter()
    remote, report = await run_on_ray(
        tasks, profile, address=address, workers=workers, out=out / "ray", factory=factory,
        modes=modes, arms=arms,
    )  # fmt: skip
    ray_wall = time.perf_counter() - t0
    key: Key = ("overlap", "pipeline")
    median = statistics.median(report.overhead_s)
    return OverheadReport(
        tasks=[t.task_id for t in tasks],
        workers=workers,
        overhead_s=report.overhead_s,
        median_overhead_s=median,
        target_s=TARGET_S,
        met=median <= TARGET_S,
        local_wall_s=local_wall,
        ray_wall_s=ray_wall,
        ray_setup_s=ray_wall - report.wall_s,
        passed_local=_passed(local[key]),
        passed_ray=_passed(remote[key]),
        identical_pass_fail=_passed(local[key]) == _passed(remote[key]),
        tasks_per_worker={w.name: w.tasks for w in report.workers},
    )


def _passed(summary: RunSummary) -> dict[str, bool]:
    return {r.task_id: r.passed for r in summary.results}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", default="builtin", help="builtin, humaneval or a folder")
    parser.add_argument("--limit", type=positive_int, default=6, help="tasks (in id order)")
    parser.add_argument("--workers", type=positive_int, default=2, help="Ray workers")
    parser.add_argument("--ray", metavar="ADDRESS", help="Ray address (default: a local Ray)")
    parser.add_argument("--out", type=Path, default=Path("ray-overhead.json"), help="JSON report")


def main(args: argparse.Namespace) -> int:
    """Ray's overhead per task (fake models): a local run vs a run on Ray workers."""
    with tempfile.TemporaryDirectory(prefix="swapos-ray-overhead-") as tmp:
        report = anyio.run(
            lambda: measure(
                suite=args.suite, limit=args.limit, workers=args.workers, address=args.ray,
                out=Path(tmp),
            )
        )  # fmt: skip
    write_atomic(args.out, msgspec.json.format(msgspec.json.encode(report), indent=2) + b"\n")
    per_task = ", ".join(f"{x * 1000:.1f}" for x in report.overhead_s)
    print(f"Ray overhead per task (ms): {per_task}")
    verdict = "MET" if report.met else "MISSED"
    print(
        f"median {report.median_overhead_s * 1000:.1f} ms (target <= "
        f"{TARGET_S * 1000:.0f} ms): {verdict}"
    )
    print(
        f"wall: local {report.local_wall_s:.2f} s; Ray {report.ray_wall_s:.2f} s "
        f"(of which ray.init and ray.shutdown {report.ray_setup_s:.2f} s); tasks per "
        f"worker {report.tasks_per_worker}"
    )
    print(f"pass/fail identical: {report.identical_pass_fail}; wrote {args.out}")
    return 0
