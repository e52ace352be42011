"""The swap benchmark's results: one swap of one model, one pipeline run in one mode.

:func:`~swapos.bench.swap.measure.measure_swap` and :func:`~swapos.bench.swap.measure.run_mode`
produce them; the statistics (:mod:`swapos.bench.swap.stats`), the reports and the size scaling
read them back from ``bench swap``'s JSON.
"""

from __future__ import annotations

import msgspec

from swapos.records.schema import PhaseRecord


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
