"""The swap bench's statistics: medians per model and per mode, wall-time ratios between
modes, and the targets checked on them (issue 4's against ``sequential``, issue 13's against
``lru``, the strongest peer). Pure functions of the measured samples."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import msgspec

from swapos.bench.swap.results import ModeRun, SwapSample
from swapos.models.profile import Mode

COLD_SPEEDUP = 0.85
"""Cold page cache: overlap wall <= 0.85 x sequential wall."""
WARM_NOISE = 1.02
"""Warm page cache: overlap wall <= 1.02 x sequential wall (never worse than noise)."""
HIDDEN_FRACTION = 0.9
"""Cold page cache, budget holding two models: hidden-load fraction >= 0.9."""
LRU_TWO = 0.85
"""Cold page cache, budget for two, three-model rotation: overlap wall <= 0.85 x lru wall."""
RESIDENT_TWO = 1.08
"""Cold page cache, budget for two, three-model rotation: overlap wall <= 1.08 x resident."""
LRU_ONE = 0.95
"""Budget for one model, warm or cold: overlap wall <= 0.95 x lru wall."""
RSS_SLACK = 0.05
"""Peak RSS above the pre-load baseline <= budget + 5%."""
MiB = 2**20

RATIOS: tuple[tuple[Mode, Mode], ...] = (
    ("overlap", "lru"),
    ("overlap", "sequential"),
    ("overlap", "resident"),
    ("lru", "resident"),
    ("sequential", "resident"),
)
"""Wall-time ratios reported, as (numerator mode, denominator mode), in report order."""


class ModelStats(msgspec.Struct, frozen=True, kw_only=True):
    """Medians over the repeats of one model in one condition (fields as in SwapSample)."""

    model: str
    condition: str
    repeats: int
    load_s: float
    ttft_s: float
    swap_s: float
    evict_s: float
    peak_rss_delta_bytes: int
    rss_delta_bytes: int
    rss_after_close_delta_bytes: int
    samples: list[SwapSample]


class ModeStats(msgspec.Struct, frozen=True, kw_only=True):
    """Medians over the rounds of one mode in one condition (fields as in ModeRun);
    ``peak_rss_delta_max_bytes`` is the worst round."""

    condition: str
    mode: str
    runs: int
    wall_s: float
    open_s: float
    load_s: float
    load_hidden_s: float
    evict_s: float
    load_hidden_fraction: float
    swap_hidden_fraction: float
    loads: float
    evictions: float
    tokens: float
    peak_rss_delta_bytes: int
    peak_rss_delta_max_bytes: int
    errors: list[str]


class Ratio(msgspec.Struct, frozen=True, kw_only=True):
    """``numerator`` wall / ``denominator`` wall, per round and their median."""

    condition: str
    name: str
    per_round: list[float]
    median: float


class TargetCheck(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    condition: str
    value: float
    limit: float
    met: bool
    detail: str


def median(values: Sequence[float]) -> float:
    """The median of ``values``; 0.0 when there are none."""
    return float(statistics.median(values)) if values else 0.0


def model_stats(samples: list[SwapSample]) -> list[ModelStats]:
    """One :class:`ModelStats` per (model, condition) of ``samples``: cold ones first, each
    condition's models in the order first sampled."""
    keys = list(dict.fromkeys((s.model, s.condition) for s in samples))
    out = []
    for model, cond in sorted(keys, key=lambda k: (k[1] != "cold", keys.index(k))):
        group = [s for s in samples if (s.model, s.condition) == (model, cond)]

        def med(field: str, group: list[SwapSample] = group) -> float:
            return median([float(getattr(s, field)) for s in group])

        out.append(
            ModelStats(
                model=model, condition=cond, repeats=len(group), load_s=med("load_s"),
                ttft_s=med("ttft_s"), swap_s=med("swap_s"), evict_s=med("evict_s"),
                peak_rss_delta_bytes=int(med("peak_rss_delta_bytes")),
                rss_delta_bytes=int(med("rss_delta_bytes")),
                rss_after_close_delta_bytes=int(med("rss_after_close_delta_bytes")),
                samples=group,
            )
        )  # fmt: skip
    return out


def mode_stats(runs: list[ModeRun], condition: str, mode: str) -> ModeStats | None:
    """The medians of ``mode``'s runs in ``condition``; None when it has none."""
    group = [r for r in runs if (r.condition, r.mode) == (condition, mode)]
    if not group:
        return None

    def med(field: str) -> float:
        return median([float(getattr(r, field)) for r in group])

    return ModeStats(
        condition=condition, mode=mode, runs=len(group), wall_s=med("wall_s"),
        open_s=med("open_s"), load_s=med("load_s"), load_hidden_s=med("load_hidden_s"),
        evict_s=med("evict_s"), load_hidden_fraction=med("load_hidden_fraction"),
        swap_hidden_fraction=med("swap_hidden_fraction"), loads=med("loads"),
        evictions=med("evictions"), tokens=med("tokens"),
        peak_rss_delta_bytes=int(med("peak_rss_delta_bytes")),
        peak_rss_delta_max_bytes=max(r.peak_rss_delta_bytes for r in group),
        errors=[f"round {r.round}: {r.error}" for r in group if r.error],
    )  # fmt: skip


def wall_ratios(runs: list[ModeRun], conditions: list[str]) -> list[Ratio]:
    """Each of :data:`RATIOS` per condition, over the rounds where both modes ran without
    error; a ratio with no such round is left out."""
    walls = {(r.round, r.condition, r.mode): r.wall_s for r in runs if r.error is None}
    rounds = sorted({r.round for r in runs})
    out = []
    for cond in conditions:
        for num, den in RATIOS:
            per_round = [
                walls[(k, cond, num)] / walls[(k, cond, den)]
                for k in rounds
                if (k, cond, num) in walls and walls.get((k, cond, den), 0.0) > 0
            ]
            if per_round:
                name = f"{num}/{den}"
                out.append(
                    Ratio(condition=cond, name=name, per_round=per_round, median=median(per_round))
                )
    return out


def targets(
    modes: list[ModeStats],
    ratios: list[Ratio],
    *,
    budget: int,
    holds_two: bool,
    schedule: str = "alternating",
) -> list[TargetCheck]:
    """The targets, on the medians (peak RSS: on the worst round)."""
    checks = _wall_checks(ratios) + _lru_checks(ratios, holds_two=holds_two, schedule=schedule)
    for m in modes:
        if m.mode == "overlap" and m.condition == "cold" and holds_two:
            checks += _hidden_checks(m)
        if m.mode != "resident":
            checks.append(_rss_check(m, budget))
    errors = [e for m in modes for e in m.errors]
    if errors:
        checks.append(TargetCheck(
            name="pipeline runs without error", condition="all", value=len(errors), limit=0,
            met=False, detail="; ".join(errors),
        ))  # fmt: skip
    return checks


def _wall_checks(ratios: list[Ratio]) -> list[TargetCheck]:
    """Issue 4's: overlap against ``sequential``, cold and warm."""
    wanted = [
        ("cold", "overlap/sequential", COLD_SPEEDUP),
        ("warm", "overlap/sequential", WARM_NOISE),
    ]
    return _ratio_checks(ratios, wanted)


def _lru_checks(ratios: list[Ratio], *, holds_two: bool, schedule: str) -> list[TargetCheck]:
    """Against the strongest peer: under a budget for two on the three-model rotation
    (cold), overlap <= 0.85 x lru and <= 1.08 x resident; under a budget for one (any
    schedule, warm or cold), overlap <= 0.95 x lru."""
    wanted: list[tuple[str, str, float]] = []
    if holds_two and schedule == "rotation":
        wanted = [("cold", "overlap/lru", LRU_TWO), ("cold", "overlap/resident", RESIDENT_TWO)]
    elif not holds_two:
        wanted = [(cond, "overlap/lru", LRU_ONE) for cond in ("cold", "warm")]
    return _ratio_checks(ratios, wanted)


def _ratio_checks(ratios: list[Ratio], wanted: list[tuple[str, str, float]]) -> list[TargetCheck]:
    """One check per ``(condition, ratio name, limit)`` measured: the median of its rounds
    at most the limit (``overlap/lru`` is shown as ``overlap wall / lru wall <=``)."""
    ratio = {(r.condition, r.name): r for r in ratios}
    checks = []
    for cond, name, limit in wanted:
        r = ratio.get((cond, name))
        if r is not None:
            rounds = ", ".join(f"{v:.3f}" for v in r.per_round)
            checks.append(TargetCheck(
                name=f"{name.replace('/', ' wall / ')} wall <=", condition=cond,
                value=r.median, limit=limit, met=r.median <= limit,
                detail=f"median of rounds [{rounds}]",
            ))  # fmt: skip
    return checks


def _hidden_checks(m: ModeStats) -> list[TargetCheck]:
    return [
        TargetCheck(
            name=name, condition="cold", value=value, limit=HIDDEN_FRACTION,
            met=value >= HIDDEN_FRACTION,
            detail=f"hidden {m.load_hidden_s:.2f}s, paid {m.load_s:.2f}s (all phases)",
        )
        for name, value in (
            ("hidden-load fraction >=", m.load_hidden_fraction),
            ("hidden-load fraction, swaps only (phase 2..n) >=", m.swap_hidden_fraction),
        )
    ]  # fmt: skip


def _rss_check(m: ModeStats, budget: int) -> TargetCheck:
    limit = budget * (1 + RSS_SLACK)
    return TargetCheck(
        name=f"{m.mode} peak RSS - baseline (MiB) <=", condition=m.condition,
        value=m.peak_rss_delta_max_bytes / MiB, limit=limit / MiB,
        met=m.peak_rss_delta_max_bytes <= limit,
        detail=f"worst of {m.runs} rounds; median {m.peak_rss_delta_bytes / MiB:.0f} "
        f"MiB; budget {budget / MiB:.0f} MiB + 5%",
    )  # fmt: skip
