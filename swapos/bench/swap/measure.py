"""Measurements behind ``python -m swapos.bench swap``: one model swap, one pipeline run.

Everything here times real work with :func:`time.perf_counter` and reads the process's RSS
from ``/proc``; the backend is injected (:class:`Rig`), so the same functions run on the
llama backend for the benchmark and on the fake backend in tests.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import anyio
import msgspec
import structlog

from swapos.actors.prefetcher import PrefetchPolicy
from swapos.actors.system import open_system
from swapos.backends.base import ModelBackend
from swapos.bench.swap.coldcache import DROP_CACHES, drop_page_cache
from swapos.data.sampling import SamplingParams
from swapos.messages.commands import PhaseSpec
from swapos.models.profile import Mode, Profile
from swapos.models.spec import ModelSpec
from swapos.records.schema import PhaseRecord, RunSummary
from swapos.sysinfo import peak_rss_bytes, reset_peak_rss, rss_bytes

log = structlog.get_logger(__name__)

T = TypeVar("T")

TTFT_PROMPT_TOKENS = 200
PROMPT = '''\
"""Inventory service: stock levels, reservations and restocking for a small warehouse."""

from __future__ import annotations

import dataclasses
from collections import defaultdict


@dataclasses.dataclass
class Item:
    sku: str
    name: str
    quantity: int = 0
    reserved: int = 0
    reorder_level: int = 5

    def available(self) -> int:
        """Units that can still be reserved."""
        return self.quantity - self.reserved


class Inventory:
    """Keeps items by SKU and the reservations made against them."""

    def __init__(self) -> None:
        self.items: dict[str, Item] = {}
        self.reservations: dict[str, list[tuple[str, int]]] = defaultdict(list)

    def add(self, item: Item) -> None:
        if item.sku in self.items:
            raise ValueError(f"duplicate sku {item.sku}")
        self.items[item.sku] = item

    def reserve(self, order_id: str, sku: str, count: int) -> bool:
'''
"""A fixed code prompt (~250 Gemma tokens): the TTFT probe uses its first 200 tokens, each
pipeline phase all of it."""


@dataclass(frozen=True)
class Rig:
    """What the benchmark runs on: a profile, its resolved models, a backend factory.

    Attributes:
        profile: the profile (budget, models) every system is opened with.
        specs: its models, resolved to files.
        new_backend: a fresh backend (one per system, so no state leaks between runs).
        drop_caches: the kernel's ``drop_caches`` file (tests pass another).
    """

    profile: Profile
    specs: dict[str, ModelSpec]
    new_backend: Callable[[], ModelBackend]
    drop_caches: Path = DROP_CACHES


class CacheDropper:
    """Empties the page cache: the global ``drop_caches`` where writable, else per file.

    Args:
        backend: used for the per-file fallback (``posix_fadvise(DONTNEED)``).
        specs: the files to drop in the fallback.
        path: the kernel's ``drop_caches`` file.
    """

    def __init__(self, backend: ModelBackend, specs: dict[str, ModelSpec], path: Path) -> None:
        self._backend = backend
        self._specs = specs
        self._path = path
        self.method: str | None = None
        """``drop_caches``, ``fadvise``, or None until the first drop (or when impossible)."""
        self.unavailable: str | None = None
        self.drops = 0

    async def drop(self) -> bool:
        """Drop the cache (blocking parts in worker threads); False when it cannot be done.

        The method that worked first is kept; when neither works, :attr:`unavailable` says
        why and later calls return False at once.
        """
        if self.unavailable is not None:
            return False
        reason = ""
        if self.method != "fadvise":
            why = await anyio.to_thread.run_sync(drop_page_cache, self._path)
            if why is None:
                self.method = "drop_caches"
                self.drops += 1
                return True
            reason = why
        if self.method != "drop_caches":
            results = [await self._backend.drop_page_cache(s) for s in self._specs.values()]
            if results and all(results):
                self.method = "fadvise"
                self.drops += 1
                return True
            reason = f"{reason}; per-file posix_fadvise(DONTNEED) failed or is unsupported"
        self.unavailable = reason
        log.warning("bench_swap.cold_unavailable", reason=reason)
        return False


# --- one swap of one model ----------------------------------------------------------------


class SwapSample(msgspec.Struct, frozen=True, kw_only=True):
    """One load → first token → close of one model.

    Attributes:
        load_s: ``backend.load``.
        ttft_s: the first generation's request to first token (tokenize excluded; prefill of
            the probe prompt included), as the backend measured it.
        swap_s: from the load's start to the first token (load + tokenize + ttft).
        evict_s: ``model.close()``.
        prompt_tokens: tokens of the probe prompt.
        peak_rss_delta_bytes: peak RSS over load + generation minus the RSS before the load.
        rss_delta_bytes: RSS after the generation minus the RSS before the load.
        rss_after_close_delta_bytes: RSS after close minus the RSS before the load (what a
            close failed to give back).
    """

    model: str
    condition: str
    load_s: float
    ttft_s: float
    swap_s: float
    evict_s: float
    prompt_tokens: int
    peak_rss_delta_bytes: int
    rss_delta_bytes: int
    rss_after_close_delta_bytes: int


async def measure_swap(
    backend: ModelBackend, spec: ModelSpec, *, condition: str, dropper: CacheDropper
) -> SwapSample | None:
    """Load ``spec``, generate one token from the probe prompt, close it; time each step.

    ``condition`` is ``cold`` (page cache dropped first) or ``warm`` (the file read into the
    page cache first). Returns None when a cold drop was impossible. On error or
    cancellation the model is still closed (shielded).
    """
    if condition == "cold":
        if not await dropper.drop():
            return None
    else:
        await backend.warm(spec)
    rss0 = rss_bytes()
    reset_peak_rss()
    t0 = time.perf_counter()
    model = await backend.load(spec)
    try:
        load_s = time.perf_counter() - t0
        tokens = (await model.tokenize(PROMPT))[:TTFT_PROMPT_TOKENS]
        out = await model.generate(tokens, SamplingParams(max_tokens=1))
        swap_s = time.perf_counter() - t0
        peak, rss1 = peak_rss_bytes(), rss_bytes()
    finally:
        with anyio.CancelScope(shield=True):
            t1 = time.perf_counter()
            await model.close()
            evict_s = time.perf_counter() - t1
    return SwapSample(
        model=spec.name,
        condition=condition,
        load_s=load_s,
        ttft_s=out.stats.ttft_s,
        swap_s=swap_s,
        evict_s=evict_s,
        prompt_tokens=len(tokens),
        peak_rss_delta_bytes=peak - rss0,
        rss_delta_bytes=rss1 - rss0,
        rss_after_close_delta_bytes=rss_bytes() - rss0,
    )


# --- one pipeline run in one mode ---------------------------------------------------------


SCHEDULES = ("alternating", "rotation")
"""``alternating``: ``A B C B C …``. ``rotation``: a task loop with one retry per task, by the
profile's roles: reason, code, critic, fix, critic, then the next task's reason, …"""


def alternating(models: list[str], n: int) -> list[str]:
    """``A, B, C, B, C, ...`` (``n`` long) from the first three of ``models``."""
    if n <= 0:
        return []
    first, b, c = models[0], models[1 % len(models)], models[2 % len(models)]
    return [first] + [(b, c)[i % 2] for i in range(n - 1)]


def rotation(roles: Mapping[str, str], models: list[str], n: int) -> list[str]:
    """``n`` uses of the task loop reason, code, critic, fix, critic (one retry per task), each
    role on the model ``roles`` gives it. A role the profile leaves out falls to the first,
    second and third model for reason, code and critic, and to the coder for fix: planner,
    coder, critic, coder, critic, planner, … on three models."""
    k = len(models)
    code = roles.get("code", models[1 % k])
    loop = [roles.get("reason", models[0]), code, roles.get("critic", models[2 % k])]
    loop += [roles.get("fix", code), loop[2]]
    return [loop[i % len(loop)] for i in range(max(n, 0))]


def schedule_models(
    schedule: str, models: list[str], roles: Mapping[str, str], n: int
) -> list[str]:
    """The model of each of ``n`` phases under ``schedule`` (one of :data:`SCHEDULES`)."""
    if schedule == "rotation":
        return rotation(roles, models, n)
    if schedule == "alternating":
        return alternating(models, n)
    raise ValueError(f"unknown schedule {schedule!r} (choose from {', '.join(SCHEDULES)})")


def pipeline_phases(models: Sequence[str], tokens: int, *, prompt: str = PROMPT) -> list[PhaseSpec]:
    """One greedy phase of ``tokens`` tokens per entry of ``models``, all from ``prompt``."""
    params = SamplingParams(max_tokens=tokens, temperature=0.0)
    return [
        PhaseSpec(phase=f"p{i}", model=m, prompt=prompt, params=params)
        for i, m in enumerate(models)
    ]


def round_order(items: Sequence[T], round_: int) -> list[T]:
    """``items`` rotated left by ``round_``: each round starts with the next one, so no
    mode always runs first (on a cold page cache, or right after the system starts)."""
    k = round_ % len(items)
    return [*items[k:], *items[:k]]


class ModeRun(msgspec.Struct, frozen=True, kw_only=True):
    """One timed ``run_phases`` of the pipeline, in one mode and condition.

    Attributes:
        wall_s: ``run_phases`` alone (the system was opened, and resident's models
            preloaded, before the clock started).
        open_s: opening the system (resident: the preload of every model).
        load_s, load_hidden_s, evict_s: sums over the phases (docs/timings.md).
        load_hidden_fraction: hidden / (hidden + paid) over every phase (the run summary's).
        swap_hidden_fraction: the same without the first phase, whose load nothing can
            hide (it is the pipeline's cold start, not a swap).
        loads, evictions: the run's counters (resident's preload loads included).
        tokens: tokens generated over all phases.
        baseline_rss_bytes: RSS before the system opened.
        open_rss_bytes: RSS once it was open (resident: every model loaded).
        peak_rss_bytes: the process's peak RSS, reset before opening (resident) or once
            open (budgeted modes), read after the run.
        peak_rss_delta_bytes: ``peak_rss_bytes`` minus the RSS before any model loaded.
        load_avg: the 1-minute load average when the run ended.
        records: the per-phase records (docs/timings.md), to see where the time went.
    """

    round: int
    condition: str
    mode: str
    position: int
    wall_s: float
    open_s: float
    load_s: float
    load_hidden_s: float
    evict_s: float
    load_hidden_fraction: float
    swap_hidden_fraction: float
    loads: int
    evictions: int
    tokens: int
    baseline_rss_bytes: int
    open_rss_bytes: int
    peak_rss_bytes: int
    peak_rss_delta_bytes: int
    load_avg: float
    error: str | None = None
    records: list[PhaseRecord] = msgspec.field(default_factory=list)


def _fraction(hidden: float, paid: float) -> float:
    return hidden / (hidden + paid) if hidden + paid > 0 else 0.0


async def run_mode(
    rig: Rig,
    mode: Mode,
    phases: list[PhaseSpec],
    *,
    condition: str,
    round_: int = 0,
    position: int = 0,
    dropper: CacheDropper | None = None,
    prefetch: PrefetchPolicy | None = None,
) -> ModeRun:
    """Open a fresh system in ``mode``, time one ``run_phases`` of ``phases``, close it.

    In the ``cold`` condition the page cache is dropped first and the system drops each
    evicted model's file (``open_system(cold=True)``); in the ``warm`` condition every model
    file is read into the page cache first (a cold run before it may have dropped them).
    ``prefetch`` applies to ``overlap`` only. Errors of the phases are recorded in
    :attr:`ModeRun.error`; cancellation closes the system and propagates.
    """
    cold = condition == "cold"
    backend = rig.new_backend()
    if cold and dropper is not None:
        await dropper.drop()
    elif not cold:  # an earlier cold run (or cold swap) may have dropped these files
        for spec in rig.specs.values():
            await backend.warm(spec)
    rss0 = rss_bytes()
    reset_peak_rss()
    t0 = time.perf_counter()
    async with open_system(
        rig.profile,
        backend=backend,
        specs=rig.specs,
        mode=mode,
        cold=cold,
        kv_cache=False,
        prefetch=prefetch if mode == "overlap" else None,
    ) as system:
        open_s = time.perf_counter() - t0
        rss_open = rss_bytes()
        if mode != "resident":
            reset_peak_rss()
        t1 = time.perf_counter()
        out = await system.run_phases(f"swap-{condition}-{mode}-{round_}", phases)
        wall = time.perf_counter() - t1
        peak = peak_rss_bytes()
        summary = system.summary()
    return _mode_run(
        out.records, summary, round_=round_, condition=condition, mode=mode,
        position=position, wall_s=wall, open_s=open_s, rss=(rss0, rss_open, peak),
        error=out.error,
    )  # fmt: skip


def _mode_run(
    recs: list[PhaseRecord],
    summary: RunSummary,
    *,
    round_: int,
    condition: str,
    mode: Mode,
    position: int,
    wall_s: float,
    open_s: float,
    rss: tuple[int, int, int],
    error: str | None,
) -> ModeRun:
    """One run's figures from its phase records and run summary; ``rss`` is the RSS before
    opening, once open, and the peak."""
    rss0, rss_open, peak = rss
    paid, hidden = sum(r.load_s for r in recs), sum(r.load_hidden_s for r in recs)
    rest = recs[1:]
    return ModeRun(
        round=round_,
        condition=condition,
        mode=mode,
        position=position,
        wall_s=wall_s,
        open_s=open_s,
        load_s=paid,
        load_hidden_s=hidden,
        evict_s=sum(r.evict_s for r in recs),
        load_hidden_fraction=summary.load_hidden_fraction,
        swap_hidden_fraction=_fraction(
            sum(r.load_hidden_s for r in rest), sum(r.load_s for r in rest)
        ),
        loads=summary.loads,
        evictions=summary.evictions,
        tokens=sum(r.tokens for r in recs),
        baseline_rss_bytes=rss0,
        open_rss_bytes=rss_open,
        peak_rss_bytes=peak,
        peak_rss_delta_bytes=peak - (rss0 if mode == "resident" else rss_open),
        load_avg=os.getloadavg()[0],
        error=error,
        records=recs,
    )
