"""Is a resource flat? A least-squares line through the samples taken after warm-up.

Pure functions (no I/O, no event loop), so the verdict the soak benchmark prints is tested
on its own. A metric is *flat* when the line fitted through its post-warm-up samples, carried
over that window, grows by no more than a tolerance: it must not climb with the task count.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

MIB = 2**20
MIN_SAMPLES = 3


class Sample(msgspec.Struct, frozen=True, kw_only=True):
    """The process after ``tasks`` tasks (after a garbage collection)."""

    tasks: int
    t_s: float
    rss_bytes: int
    open_fds: int
    threads: int
    kv_ram_bytes: int = 0
    """What the KV cache's RAM tier held (bounded by its budget, so it grows until full)."""
    rss_trimmed_bytes: int = 0
    """RSS once the allocator returned the heap memory it kept free (``malloc_trim``)."""

    @property
    def rss_less_kv_bytes(self) -> int:
        """Memory in use that the KV RAM tier does not explain: RSS after ``malloc_trim``
        less the tier's bytes. A leak makes it climb; a cache filling to its budget or an
        allocator keeping freed memory for reuse does not."""
        return (self.rss_trimmed_bytes or self.rss_bytes) - self.kv_ram_bytes


class Tolerance(msgspec.Struct, frozen=True, kw_only=True):
    """How much a metric may grow over the post-warm-up window and still be flat.

    ``absolute`` in the metric's unit; ``relative`` as a share of its mean over the window;
    the larger of the two applies.
    """

    absolute: float
    relative: float = 0.0


TOLERANCES: dict[str, Tolerance] = {
    "rss_bytes": Tolerance(absolute=8 * MIB, relative=0.02),
    "rss_less_kv_bytes": Tolerance(absolute=8 * MIB, relative=0.02),
    "open_fds": Tolerance(absolute=2),
    "threads": Tolerance(absolute=2),
}
"""RSS may drift by the larger of 8 MiB and 2 % of its mean (allocator and page-cache noise;
a leak of 40 KiB a task over 200 tasks exceeds it), with and without the KV RAM tier (which
grows by design until its budget is full: a run whose tier fills after warm-up shows RSS
climbing while the rest stays flat); descriptors and threads by two (a worker
thread pool that grows or shrinks by one or two idle workers is not a leak)."""


class Trend(msgspec.Struct, frozen=True, kw_only=True):
    """The fitted line of one metric after warm-up, and the verdict."""

    metric: str
    samples: int
    first: float
    last: float
    mean: float
    slope_per_task: float
    growth: float
    """``slope_per_task`` times the tasks the window spans: what the line climbs over it."""
    tolerance: float
    flat: bool
    enough: bool
    """At least :data:`MIN_SAMPLES` samples after warm-up: fewer make no verdict."""


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The least-squares slope of ``ys`` over ``xs`` (0 with fewer than two distinct xs)."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def after_warmup(samples: Sequence[Sample], warmup_tasks: int) -> list[Sample]:
    """The samples taken once ``warmup_tasks`` tasks had run (the warm-up fills caches,
    loads models and starts worker threads: growth there is expected)."""
    return [s for s in samples if s.tasks >= warmup_tasks]


def trend(metric: str, samples: Sequence[Sample]) -> Trend:
    """Fit ``metric`` (a :class:`Sample` field) over ``samples`` and judge it flat or not.

    Raises:
        ValueError: ``metric`` has no tolerance in :data:`TOLERANCES`.
    """
    if metric not in TOLERANCES:
        raise ValueError(f"no tolerance for {metric!r}; known: {', '.join(TOLERANCES)}")
    xs = [float(s.tasks) for s in samples]
    ys = [float(getattr(s, metric)) for s in samples]
    mean = sum(ys) / len(ys) if ys else 0.0
    k = slope(xs, ys)
    growth = k * (xs[-1] - xs[0]) if xs else 0.0
    tol = TOLERANCES[metric]
    allowed = max(tol.absolute, tol.relative * mean)
    return Trend(
        metric=metric,
        samples=len(ys),
        first=ys[0] if ys else 0.0,
        last=ys[-1] if ys else 0.0,
        mean=mean,
        slope_per_task=k,
        growth=growth,
        tolerance=allowed,
        flat=growth <= allowed,
        enough=len(ys) >= MIN_SAMPLES,
    )


def trends(samples: Sequence[Sample], warmup_tasks: int) -> list[Trend]:
    """Every metric's :class:`Trend` over the samples after warm-up."""
    window = after_warmup(samples, warmup_tasks)
    return [trend(metric, window) for metric in TOLERANCES]
