"""Measurements behind ``python -m swapos.bench swap``: one model swap, one pipeline run.

Everything here times real work with :func:`time.perf_counter` and reads the process's RSS
from ``/proc``; the backend is injected (:class:`Rig`), so the same functions run on the
llama backend for the benchmark and on the fake backend in tests. What is run (the probe
prompt, the schedules) is in :mod:`~swapos.bench.swap.workload`, the result Structs in
:mod:`~swapos.bench.swap.results`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import structlog

from swapos.actors.prefetcher import PrefetchPolicy
from swapos.actors.system import open_system
from swapos.backends.base import ModelBackend
from swapos.bench.swap.coldcache import DROP_CACHES, drop_page_cache
from swapos.bench.swap.results import ModeRun, SwapSample
from swapos.bench.swap.workload import PROMPT, TTFT_PROMPT_TOKENS
from swapos.data.sampling import SamplingParams
from swapos.messages.commands import PhaseSpec
from swapos.models.profile import Mode, Profile
from swapos.models.spec import ModelSpec
from swapos.records.schema import PhaseRecord, RunSummary
from swapos.sysinfo import peak_rss_bytes, reset_peak_rss, rss_bytes

log = structlog.get_logger(__name__)


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
