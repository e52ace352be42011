"""A run's summary from its finished tasks: every aggregate of docs/timings.md, one function."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

import msgspec

from swapos.records.schema import CategoryStats, PhaseRecord, RunInfo, RunSummary, TaskResult


def summarize(results: Sequence[TaskResult], info: RunInfo) -> RunSummary:
    """The run summary of ``results`` (in order), every aggregate computed from them.

    :meth:`swapos.records.aggregate.Aggregator.summary` (live and replay) and the benchmark
    results files (resumable) both use it, so their numbers agree by construction.
    """
    results = list(results)
    phases = [p for r in results for p in r.phases]
    generated = [p for p in phases if p.model is not None]
    paid = sum(p.load_s for p in generated)
    hidden = sum(p.load_hidden_s for p in generated)
    passed = sum(r.passed for r in results)
    first_failed = sum(not r.pass_at_1 for r in results)
    rescued = sum(r.passed and not r.pass_at_1 for r in results)
    drawn = sum(r.pass_at_1 and r.passed_attempt == 1 and drew(r) for r in results)
    per_cat: dict[str, CategoryStats] = {}
    for r in results:
        c = per_cat.setdefault(r.category or "none", CategoryStats())
        c.tasks += 1
        c.passed += r.passed
    for c in per_cat.values():
        c.pass_rate = c.passed / c.tasks
    n = len(results)
    servable, served = kv_served(generated)
    return RunSummary(
        **msgspec.structs.asdict(info_of(info)),
        tasks_total=n,
        tasks_passed=passed,
        pass_rate=passed / n if n else 0.0,
        pass_at_1=sum(r.pass_at_1 for r in results) / n if n else 0.0,
        retry_rescued=rescued,
        retry_rescue_rate=rescued / first_failed if first_failed else 0.0,
        draw_rescued=drawn,
        per_category=per_cat,
        mean_wall_clock_s=_mean([r.wall_clock_s for r in results]),
        mean_wall_passed_s=_mean([r.wall_clock_s for r in results if r.passed]),
        mean_wall_failed_s=_mean([r.wall_clock_s for r in results if not r.passed]),
        failed_wall_share=_share(
            sum(r.wall_clock_s for r in results if not r.passed),
            sum(r.wall_clock_s for r in results),
        ),
        phases_total=len(phases),
        mean_load_s=_mean([p.load_s for p in generated]),
        mean_evict_s=_mean([p.evict_s for p in generated]),
        mean_ttft_s=_mean([p.ttft_s for p in generated]),
        total_load_s=paid,
        total_load_hidden_s=hidden,
        total_evict_s=sum(p.evict_s for p in generated),
        load_hidden_fraction=hidden / (hidden + paid) if hidden + paid > 0 else 0.0,
        prefill_tokens=sum(p.prefill_tokens for p in generated),
        prefill_s=sum(p.prefill_s for p in generated),
        kv_restored_tokens=sum(p.kv_restored_tokens for p in generated),
        kv_servable_tokens=servable,
        kv_served_tokens=served,
        kv_served_share=served / servable if servable else 0.0,
        peak_rss_bytes=(peak := max((p.peak_rss_bytes for p in phases), default=0)),
        peak_rss_of_budget=rss_of_budget(peak, info.budget_bytes),
        results=results,
    )


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def rss_of_budget(peak_rss: int, budget: int) -> float:
    """The run's peak RSS as a share of its budget: how near the process stayed to what the
    user wrote (0 when the budget is unknown or unlimited, as in ``resident`` mode)."""
    return peak_rss / budget if 0 < budget < 2**61 else 0.0


def peak_rss_text(peak_rss: int, budget: int, *, places: int = 2, note: str = "") -> str:
    """``peak RSS 1545 MiB of 1536 MiB budget (1.01x)`` (``note`` inside the brackets, after
    the share), or "" when the budget is unknown or unlimited (:func:`rss_of_budget`)."""
    share = rss_of_budget(peak_rss, budget)
    if not share:
        return ""
    mib = 2**20
    return (
        f"peak RSS {peak_rss / mib:.0f} MiB of {budget / mib:.0f} MiB budget "
        f"({share:.{places}f}x{note})"
    )


def drew(result: TaskResult) -> bool:
    """Whether ``result``'s first attempt drew candidates (its first failed its examples):
    it then has more than one code phase of attempt 1 (a resample needs a failed grade, so
    attempt 1 has none)."""
    return sum(p.phase == "code" and p.attempt == 1 for p in result.phases) > 1


def kv_served(phases: Iterable[PhaseRecord]) -> tuple[int, int]:
    """``(servable, served)`` over ``phases``: prompt tokens the same model had already read
    in its task, and of those the ones restored (each phase's restored tokens up to its
    servable ones: a cache cannot be credited with tokens no cache could serve)."""
    servable = served = 0
    for p in phases:
        servable += p.kv_servable_tokens
        served += min(p.kv_restored_tokens, p.kv_servable_tokens)
    return servable, served


def info_of(summary: RunInfo) -> RunInfo:
    """The :class:`RunInfo` part of ``summary`` (a :class:`RunSummary` or a ``RunInfo``), as
    a copy: its lists and dicts are new."""
    info = RunInfo(**{name: getattr(summary, name) for name in RunInfo.__struct_fields__})
    info.models, info.host = list(info.models), dict(info.host)
    return info


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0
