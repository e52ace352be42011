"""Statistics for paired benchmark comparisons: pure functions, no scipy.

- :func:`mcnemar_exact`: the exact two-sided McNemar test on paired pass/fail outcomes
  (a binomial test on the discordant pairs).
- :func:`ratio_stats`: per-task wall-time ratios between two modes, summarized by their
  median with a seeded bootstrap 95% interval, plus the ratio of totals.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence

import msgspec

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20240601


class McNemar(msgspec.Struct, frozen=True, kw_only=True):
    """A paired comparison of pass/fail outcomes between ``a`` and ``b`` on shared tasks.

    Attributes:
        a, b: the two sides (e.g. ``overlap-pipeline`` and ``overlap-single``).
        n: tasks both sides finished.
        both_pass, both_fail: concordant pairs.
        only_a, only_b: discordant pairs (``a`` passed and ``b`` failed, and vice versa).
        p_value: exact two-sided McNemar p-value (1.0 when there are no discordant pairs).
    """

    a: str
    b: str
    n: int
    both_pass: int
    both_fail: int
    only_a: int
    only_b: int
    p_value: float


class RatioStats(msgspec.Struct, frozen=True, kw_only=True):
    """Per-task ratios ``num / den`` over the tasks both sides finished.

    Attributes:
        n: paired tasks with a positive denominator.
        median: median of the per-task ratios.
        ci_low, ci_high: seeded percentile-bootstrap interval of that median.
        ratio_of_totals: sum of numerators / sum of denominators.

    Every figure is None when no task pairs up.
    """

    n: int
    median: float | None
    ci_low: float | None
    ci_high: float | None
    ratio_of_totals: float | None


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value for ``b`` and ``c`` discordant pairs.

    Under the null, each discordant pair is a fair coin: the p-value is
    ``min(1, 2 * P[X <= min(b, c)])`` for ``X ~ Binomial(b + c, 1/2)``.

    Raises:
        ValueError: a negative count.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return min(1.0, 2 * tail / (1 << n))


def mcnemar(a_name: str, a: Mapping[str, bool], b_name: str, b: Mapping[str, bool]) -> McNemar:
    """Pair ``a`` and ``b`` (task id -> passed) on their shared tasks and test them."""
    shared = sorted(a.keys() & b.keys())
    counts = {(x, y): 0 for x in (True, False) for y in (True, False)}
    for task in shared:
        counts[(a[task], b[task])] += 1
    only_a, only_b = counts[(True, False)], counts[(False, True)]
    return McNemar(
        a=a_name,
        b=b_name,
        n=len(shared),
        both_pass=counts[(True, True)],
        both_fail=counts[(False, False)],
        only_a=only_a,
        only_b=only_b,
        p_value=mcnemar_exact(only_a, only_b),
    )


def bootstrap_ci(
    values: Sequence[float],
    statistic: Callable[[Sequence[float]], float] = statistics.median,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = DEFAULT_SEED,
) -> tuple[float | None, float | None]:
    """Percentile-bootstrap interval of ``statistic`` over ``values``, reproducible by ``seed``.

    Returns ``(None, None)`` for no values and ``(v, v)`` for a single one.
    """
    if not values:
        return None, None
    if len(values) == 1:
        return values[0], values[0]
    rng = random.Random(seed)
    n = len(values)
    stats = sorted(
        statistic([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples)
    )
    alpha = (1 - level) / 2
    return _quantile(stats, alpha), _quantile(stats, 1 - alpha)


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of already sorted values."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def ratio_stats(
    num: Mapping[str, float], den: Mapping[str, float], *, seed: int = DEFAULT_SEED
) -> RatioStats:
    """Ratios ``num[t] / den[t]`` over shared tasks ``t`` whose denominator is positive."""
    shared = sorted(t for t in num.keys() & den.keys() if den[t] > 0)
    ratios = [num[t] / den[t] for t in shared]
    total_den = sum(den[t] for t in shared)
    lo, hi = bootstrap_ci(ratios, seed=seed)
    return RatioStats(
        n=len(ratios),
        median=statistics.median(ratios) if ratios else None,
        ci_low=lo,
        ci_high=hi,
        ratio_of_totals=sum(num[t] for t in shared) / total_den if total_den > 0 else None,
    )
