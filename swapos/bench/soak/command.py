"""The soak benchmark: many tasks on one long-lived system; do memory, descriptors and
threads stay flat?

``python -m swapos.bench soak`` runs ``--fake-tasks`` tasks (default 200) of the builtin suite
on the fake backend (scripted models, real grading sandboxes, real actors, the real clock),
then ``--real-tasks`` (default 20) on a real profile, each part on one system as a server
would be, and samples the process every ``--every`` tasks after a garbage collection: RSS,
open file descriptors, OS threads. After the warm-up (``--warmup``, a share of the tasks) a
least-squares line through each metric must not climb more than its tolerance
(:data:`~swapos.bench.soak.stats.TOLERANCES`). Exit 0 when every metric is flat, 1 if one
is not; the figures as a table and, with ``--out``, as JSON.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import anyio
import msgspec
from rich.console import Console
from rich.table import Table

from swapos.actors.system import DEFAULT_KV_CACHE_BYTES, open_system
from swapos.backends.base import ModelBackend
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.bench.soak.stats import MIB, Sample, Trend, trends
from swapos.cliargs import positive_int
from swapos.clock import MonotonicClock
from swapos.data.task import Task
from swapos.errors import SwapOSError
from swapos.models.profile import ModelConfig, PipelineConfig, Profile
from swapos.models.spec import ModelSpec
from swapos.pipeline.tasks import load_suite
from swapos.sysinfo import host_info, release_free_heap, rss_bytes

Kind = Literal["fake", "real"]
FAKE_REPLY = "def solution(*args, **kwargs):\n    return None\n```"
"""What every fake model answers: code that runs and fails the tests (a full pipeline: reason,
code, grade; the soak is about resources, not answers)."""


class SoakPart(msgspec.Struct, frozen=True, kw_only=True):
    """One backend's soak: its tasks, samples and verdicts."""

    kind: Kind
    profile: str
    async_backend: str
    tasks: int
    passed: int
    errors: int
    wall_s: float
    warmup_tasks: int
    samples: list[Sample]
    trends: list[Trend]

    @property
    def flat(self) -> bool:
        return all(t.flat for t in self.trends)


class SoakReport(msgspec.Struct, frozen=True, kw_only=True):
    host: dict[str, str]
    command: str
    load_avg_1m: tuple[float, float]
    parts: list[SoakPart]


def sample(tasks: int, t0: float, kv_ram_bytes: int = 0, *, trim: bool = True) -> Sample:
    """The process now, after a full garbage collection (Linux ``/proc``); with ``trim``,
    also after giving freed heap back to the OS (which lowers later raw samples too)."""
    gc.collect()
    rss = rss_bytes()
    trimmed = rss_bytes() if trim and release_free_heap() else 0
    return Sample(
        tasks=tasks,
        t_s=time.perf_counter() - t0,
        rss_bytes=rss,
        open_fds=_count(Path("/proc/self/fd")),
        threads=_count(Path("/proc/self/task")),
        kv_ram_bytes=kv_ram_bytes,
        rss_trimmed_bytes=trimmed,
    )


def _count(folder: Path) -> int:
    try:
        return len(os.listdir(folder))
    except OSError:
        return -1


def fake_setup() -> tuple[Profile, dict[str, ModelSpec], ModelBackend]:
    """Three scripted models in the pipeline's roles, on the real clock (milliseconds)."""
    names = ("planner", "coder", "fixer")
    profile = Profile(
        name="soak-fake",
        budget=250,
        models={n: ModelConfig(path=f"/nonexistent/{n}.gguf", n_ctx=8192) for n in names},
        roles={"reason": "planner", "code": "coder", "fix": "fixer"},
        pipeline=PipelineConfig(
            max_attempts=2, skip_reason_max_difficulty=0, resamples=2, draws=0, second_opinion=False
        ),
    )
    script = FakeModelScript(load_s=0.01, token_s=0.0002, reply=FAKE_REPLY, footprint_bytes=100)
    backend = FakeBackend(MonotonicClock(), dict.fromkeys(names, script))
    specs = {n: ModelSpec(name=n, path=f"/nonexistent/{n}.gguf", n_ctx=8192) for n in names}
    return profile, specs, backend


async def soak(
    kind: Kind,
    tasks: Sequence[Task],
    *,
    count: int,
    every: int,
    warmup: float,
    profile_name: str,
    max_attempts: int | None,
    event_dir: Path,
    kv_cache_bytes: int = DEFAULT_KV_CACHE_BYTES,
    on_sample: Callable[[Sample], None] | None = None,
    trim: bool = True,
) -> SoakPart:
    """Run ``count`` tasks (``tasks`` cycled) one after another on one system, sampling
    before the first and after every ``every``-th task (and the last); ``trim``: see
    :func:`sample`."""
    backend: ModelBackend | None = None
    specs: dict[str, ModelSpec] | None = None
    if kind == "fake":
        profile, specs, backend = fake_setup()
    else:
        from swapos.models.bundled import resolve_profile

        profile = resolve_profile(profile_name)
    t0 = time.perf_counter()
    samples = [sample(0, t0, trim=trim)]
    passed = errors = 0
    async with open_system(
        profile,
        backend=backend,
        specs=specs,
        event_log=event_dir / f"soak-{kind}.jsonl",
        kv_cache_bytes=kv_cache_bytes,
    ) as system:
        for i in range(count):
            task = tasks[i % len(tasks)]
            nxt = tasks[(i + 1) % len(tasks)] if i + 1 < count else None
            outcome = await system.run_task(task, max_attempts=max_attempts, next_task=nxt)
            passed += outcome.result.passed
            errors += outcome.result.error is not None and not outcome.result.phases
            if (i + 1) % every == 0 or i + 1 == count:
                kv_bytes = system.statistics()["kvcache"].bytes
                samples.append(sample(i + 1, t0, kv_bytes, trim=trim))
                if on_sample is not None:
                    on_sample(samples[-1])
    warmup_tasks = max(1, round(count * warmup))
    return SoakPart(
        kind=kind,
        profile=profile.name,
        async_backend=_async_backend(),
        tasks=count,
        passed=passed,
        errors=errors,
        wall_s=time.perf_counter() - t0,
        warmup_tasks=warmup_tasks,
        samples=samples,
        trends=trends(samples, warmup_tasks),
    )


def _async_backend() -> str:
    import sniffio

    return sniffio.current_async_library()


def report(args: argparse.Namespace, command: str, console: Console) -> SoakReport:
    """Run the fake part, then the real part (each skipped at 0 tasks)."""
    tasks = load_suite(args.suite)
    load0 = os.getloadavg()[0]
    parts: list[SoakPart] = []
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)  # a folder that does not exist yet
    with tempfile.TemporaryDirectory(prefix="swapos-soak-", dir=args.dir) as tmp:
        runs: list[tuple[Kind, int]] = [("fake", args.fake_tasks), ("real", args.real_tasks)]
        for kind, count in runs:
            if count == 0:
                continue
            run = functools.partial(
                soak,
                kind,
                tasks,
                count=count,
                every=args.every,
                warmup=args.warmup,
                profile_name=args.profile,
                max_attempts=args.max_attempts,
                event_dir=Path(tmp),
                kv_cache_bytes=args.kv_ram_mib * MIB,
                on_sample=functools.partial(_show, console, kind),
                trim=args.sample_trim,
            )
            parts.append(anyio.run(run, backend=args.async_backend))
    return SoakReport(
        host=host_info(), command=command, load_avg_1m=(load0, os.getloadavg()[0]), parts=parts
    )


def _show(console: Console, kind: Kind, s: Sample) -> None:
    console.print(
        f"{kind} {s.tasks:>4} tasks {s.t_s:8.1f}s  rss {s.rss_bytes / MIB:8.1f} MiB  "
        f"(trimmed {s.rss_trimmed_bytes / MIB:8.1f} MiB, kv {s.kv_ram_bytes / MIB:6.1f} MiB)  "
        f"fds {s.open_fds:>4}  threads {s.threads:>3}"
    )


def render(rep: SoakReport) -> Table:
    before, after = rep.load_avg_1m
    table = Table(
        title="SwapOS soak: flat after warm-up?",
        caption=f"load average {before:.1f} -> {after:.1f} on {rep.host.get('cpus', '?')} CPUs; "
        "growth = fitted slope x tasks after warm-up",
    )
    for col in ("part", "metric", "first", "last", "slope/task", "growth", "tolerance", ""):
        table.add_column(col, justify="left" if col in ("part", "metric", "") else "right")
    for part in rep.parts:
        label = f"{part.kind} ({part.profile}), {part.tasks} tasks, warm-up {part.warmup_tasks}"
        for t in part.trends:
            unit, scale = ("MiB", MIB) if t.metric.endswith("_bytes") else ("", 1)
            verdict = (
                f"[yellow]{t.samples} samples: no verdict[/yellow]"
                if not t.enough
                else "[green]flat[/green]"
                if t.flat
                else "[red]grows[/red]"
            )
            table.add_row(
                label,
                t.metric,
                f"{t.first / scale:,.1f}{unit}",
                f"{t.last / scale:,.1f}{unit}",
                f"{t.slope_per_task / scale:+.4f}{unit}",
                f"{t.growth / scale:+,.2f}{unit}",
                f"{t.tolerance / scale:,.1f}{unit}",
                verdict,
            )
            label = ""
    return table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument(
        "--fake-tasks", type=int, default=200, help="tasks on the fake backend (0: skip)"
    )
    parser.add_argument(
        "--real-tasks", type=int, default=20, help="tasks on the real profile (0: skip)"
    )
    parser.add_argument("--every", type=positive_int, default=10, help="sample after every N tasks")
    parser.add_argument(
        "--warmup",
        type=float,
        default=0.25,
        help="share of each part's tasks left out of the fit (default 0.25)",
    )
    parser.add_argument(
        "--profile", default="tiny", help="profile of the real part (builtin name or TOML)"
    )
    parser.add_argument("--suite", default="builtin", help="tasks, cycled (default: builtin)")
    parser.add_argument(
        "--max-attempts", type=positive_int, default=1, help="code attempts per task (default 1)"
    )
    parser.add_argument(
        "--async-backend", choices=["asyncio", "trio"], default="asyncio", help="event loop"
    )
    parser.add_argument(
        "--kv-ram-mib",
        type=positive_int,
        default=DEFAULT_KV_CACHE_BYTES // MIB,
        help="the KV cache's RAM tier budget in MiB "
        f"(default {DEFAULT_KV_CACHE_BYTES // MIB}, as a run has)",
    )
    parser.add_argument(
        "--sample-trim",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="give freed heap back to the OS at each sample and judge the trimmed RSS "
        "(--no-sample-trim: raw RSS only, as a process that never trims would have)",
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="directory for the event logs (default: temp)"
    )


def main(args: argparse.Namespace) -> int:
    """Soak: many tasks on one system; RSS, descriptors and threads must stay flat."""
    console = Console(highlight=False)
    if not console.is_terminal:  # logs and CI: wide enough for the table
        console = Console(highlight=False, width=150)
    if args.fake_tasks < 0 or args.real_tasks < 0:
        raise SwapOSError("--fake-tasks and --real-tasks are task counts: 0 or more")
    if not 0 <= args.warmup < 1:
        raise SwapOSError("--warmup is a share of the tasks: 0 <= warmup < 1")
    rep = report(args, " ".join(["python -m swapos.bench", *sys.argv[1:]]), console)
    console.print(render(rep))
    if args.out is not None:
        args.out.write_bytes(msgspec.json.format(msgspec.json.encode(rep)))
        console.print(f"written to {args.out}")
    return 0 if all(p.flat for p in rep.parts) else 1
