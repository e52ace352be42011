"""The size-scaling bench's numbers: samples, medians per size, least-squares fits.

Pure functions of the measured samples (``bench swap --sizes``; see docs/benchmarks.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import msgspec

from swapos.bench.swap.results import ModeRun
from swapos.bench.swap.stats import median
from swapos.errors import ProfileError
from swapos.models.profile import parse_size

GiB = 2**30
TOUCHES = ("none", "decode", "warm")
"""What runs between the load and the first generation (time to ready, issue 13 item 5):
nothing; a one-token warm-up decode; a read-through of the file (``backend.warm``:
``posix_fadvise(WILLNEED)`` and reading it in 8 MiB chunks)."""
_NUMBER = re.compile(r"^\s*[0-9]+(?:\.[0-9]+)?\s*$")


def parse_sizes(text: str) -> list[int]:
    """Byte sizes from ``"0.25,0.5,1"`` (plain numbers are GiB) or with units
    (``"256MiB,1GB"``), in the order given, duplicates dropped.

    Raises:
        ValueError: an item is not a positive size (the message names it).
    """
    sizes: list[int] = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        try:
            size = int(float(item) * GiB) if _NUMBER.match(item) else parse_size(item)
        except ProfileError:
            raise ValueError(f"{item!r} is not a size (GiB, or with a unit: 256MiB)") from None
        if size <= 0:
            raise ValueError(f"{item!r} is not a positive size")
        if size not in sizes:
            sizes.append(size)
    if not sizes:
        raise ValueError(f"no sizes in {text!r}")
    return sizes


def size_label(size: int) -> str:
    """``0.25GiB``, ``2GiB``, ``8MiB``: the size as reports and model names show it."""
    if size >= GiB // 4:
        return f"{size / GiB:g}GiB"
    return f"{size / 2**20:g}MiB"


class SizeSample(msgspec.Struct, frozen=True, kw_only=True):
    """One load → touch → first token → second token → close of one synthetic model.

    Attributes:
        size_bytes: the target size; ``file_bytes`` the file's real size.
        touch: one of :data:`TOUCHES`, run right after the load.
        load_s: ``backend.load``.
        touch_s: the touch (0 for ``none``).
        ttft_s: the first generation after the load (and touch): request to first token on
            the probe prompt, prefill included.
        steady_ttft_s: the same generation again: the time to first token once everything
            is in place, so ``ttft_s - steady_ttft_s`` is what the first one paid extra.
        close_s: ``model.close()``.
        peak_rss_delta_bytes: peak RSS over load, touch and generations minus the RSS before.
        load_rss_delta_bytes: RSS right after the load minus the RSS before: how much of the
            file the load already mapped in.
    """

    size_bytes: int
    file_bytes: int
    condition: str
    touch: str
    load_s: float
    touch_s: float
    ttft_s: float
    steady_ttft_s: float
    close_s: float
    prompt_tokens: int
    peak_rss_delta_bytes: int
    load_rss_delta_bytes: int


class SizeStats(msgspec.Struct, frozen=True, kw_only=True):
    """Medians over the repeats of one size, condition and touch (fields as SizeSample)."""

    size_bytes: int
    file_bytes: int
    condition: str
    touch: str
    repeats: int
    load_s: float
    touch_s: float
    ttft_s: float
    steady_ttft_s: float
    close_s: float
    peak_rss_delta_bytes: int
    load_rss_delta_bytes: int


class SizeModeStats(msgspec.Struct, frozen=True, kw_only=True):
    """Medians over the rounds of the two-model pipeline of one size, condition and mode."""

    size_bytes: int
    condition: str
    mode: str
    runs: int
    wall_s: float
    load_s: float
    load_hidden_s: float
    swap_hidden_fraction: float
    loads: float
    peak_rss_delta_bytes: int
    errors: list[str]


class SizeRun(msgspec.Struct, frozen=True, kw_only=True):
    """One pipeline run of the size bench: its size and the run."""

    size_bytes: int
    run: ModeRun


class Fit(msgspec.Struct, frozen=True, kw_only=True):
    """``seconds = intercept_s + bytes / bytes_per_s``, least squares over the samples.

    ``bytes_per_s`` is None when the slope is not positive (time does not grow with size);
    ``r2`` is the coefficient of determination (None with fewer than 3 distinct sizes or no
    spread in the times).
    """

    quantity: str
    condition: str
    samples: int
    intercept_s: float
    seconds_per_gib: float
    bytes_per_s: float | None
    r2: float | None


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float | None]:
    """``(intercept, slope, r2)`` of the least-squares line through ``(xs, ys)``.

    Raises:
        ValueError: fewer than two points, or every x the same.
    """
    n = len(xs)
    if n != len(ys) or n < 2:
        raise ValueError("a fit needs two or more (x, y) pairs")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("a fit needs two distinct x values")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    syy = sum((y - my) ** 2 for y in ys)
    r2 = None
    if syy > 0 and len(set(xs)) >= 3:
        resid = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
        r2 = 1 - resid / syy
    return intercept, slope, r2


def fits(samples: list[SizeSample], conditions: Sequence[str]) -> list[Fit]:
    """Load time and time to first token against file size, per condition, over the
    ``touch == "none"`` samples (sizes in bytes; slope reported per GiB and as bytes/s)."""
    out = []
    for cond in conditions:
        group = [s for s in samples if s.condition == cond and s.touch == "none"]
        if len({s.file_bytes for s in group}) < 2:
            continue
        xs = [float(s.file_bytes) for s in group]
        for quantity in ("load_s", "ttft_s"):
            intercept, slope, r2 = fit_line(xs, [getattr(s, quantity) for s in group])
            out.append(Fit(
                quantity=quantity, condition=cond, samples=len(group), intercept_s=intercept,
                seconds_per_gib=slope * GiB, bytes_per_s=1 / slope if slope > 0 else None,
                r2=r2 if r2 is None or math.isfinite(r2) else None,
            ))  # fmt: skip
    return out


def size_stats(samples: list[SizeSample]) -> list[SizeStats]:
    """One :class:`SizeStats` per (size, condition, touch), by size, then condition as
    sampled, then :data:`TOUCHES` order."""
    keys = sorted(
        {(s.size_bytes, s.condition, s.touch) for s in samples},
        key=lambda k: (k[0], k[1] != "warm", TOUCHES.index(k[2]) if k[2] in TOUCHES else 9),
    )
    out = []
    for size, cond, touch in keys:
        g = [s for s in samples if (s.size_bytes, s.condition, s.touch) == (size, cond, touch)]

        def med(field: str, g: list[SizeSample] = g) -> float:
            return median([float(getattr(s, field)) for s in g])

        out.append(SizeStats(
            size_bytes=size, file_bytes=g[0].file_bytes, condition=cond, touch=touch,
            repeats=len(g), load_s=med("load_s"), touch_s=med("touch_s"), ttft_s=med("ttft_s"),
            steady_ttft_s=med("steady_ttft_s"), close_s=med("close_s"),
            peak_rss_delta_bytes=int(med("peak_rss_delta_bytes")),
            load_rss_delta_bytes=int(med("load_rss_delta_bytes")),
        ))  # fmt: skip
    return out


def size_mode_stats(runs: list[SizeRun]) -> list[SizeModeStats]:
    """Medians per (size, condition, mode) of the pipeline runs."""
    keys = list(dict.fromkeys((r.size_bytes, r.run.condition, r.run.mode) for r in runs))
    out = []
    for size, cond, mode in sorted(keys, key=lambda k: (k[0], k[1] != "warm", k[2])):
        key = (size, cond, mode)
        g = [r.run for r in runs if (r.size_bytes, r.run.condition, r.run.mode) == key]

        def med(field: str, g: list[ModeRun] = g) -> float:
            return median([float(getattr(r, field)) for r in g])

        out.append(SizeModeStats(
            size_bytes=size, condition=cond, mode=mode, runs=len(g), wall_s=med("wall_s"),
            load_s=med("load_s"), load_hidden_s=med("load_hidden_s"),
            swap_hidden_fraction=med("swap_hidden_fraction"), loads=med("loads"),
            peak_rss_delta_bytes=int(med("peak_rss_delta_bytes")),
            errors=[f"round {r.round}: {r.error}" for r in g if r.error],
        ))  # fmt: skip
    return out


class SizeRatio(msgspec.Struct, frozen=True, kw_only=True):
    """overlap wall / lru wall of one size and condition: per round and the median."""

    size_bytes: int
    condition: str
    per_round: list[float]
    median: float


def overlap_lru_ratios(runs: list[SizeRun]) -> list[SizeRatio]:
    """overlap wall / lru wall per (size, condition), on the rounds where both ran without
    error, in the order the runs came."""
    walls = {
        (r.size_bytes, r.run.condition, r.run.round, r.run.mode): r.run.wall_s
        for r in runs
        if r.run.error is None
    }
    per: dict[tuple[int, str], list[float]] = {}
    for (size, cond, rnd, mode), wall in walls.items():
        lru = walls.get((size, cond, rnd, "lru"), 0.0)
        if mode == "overlap" and lru > 0:
            per.setdefault((size, cond), []).append(wall / lru)
    return [
        SizeRatio(size_bytes=size, condition=cond, per_round=v, median=median(v))
        for (size, cond), v in per.items()
    ]
