"""``bench serve``'s statistics and targets: pure functions over the measured requests."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import msgspec

from swapos.bench.swap.stats import TargetCheck

ONE_WALL: Final = 0.75
"""Issue 11: with a budget for one model, SwapOS's total wall <= this x the peer's."""
ONE_P95: Final = 0.8
"""... and its p95 request latency <= this x the peer's."""
BOTH_WALL: Final = 1.05
"""With a budget for both, SwapOS's wall within 5% of the peer with both preloaded."""
PAGE_COST: Final = 1.02
"""Issue 55: one live page open costs the server's wall at most 2 %."""


class RequestSample(msgspec.Struct, frozen=True, kw_only=True):
    """One replayed request, as the client saw it.

    Attributes:
        session, round, role, model: which request of the trace.
        start_s: when it was sent, seconds after the replay began.
        latency_s: from sending it to the whole response.
        prompt_tokens, completion_tokens: the server's ``usage`` (0 if it gave none).
        load_s, queue_wait_s: SwapOS's ``swapos`` timings (None from a peer).
        error: the failure, if the request failed.
    """

    session: int
    round: int
    role: str
    model: str
    start_s: float
    latency_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    load_s: float | None = None
    queue_wait_s: float | None = None
    error: str | None = None


class TargetRun(msgspec.Struct, frozen=True, kw_only=True):
    """One target (``swapos`` or ``peer``) under one condition (``one`` or ``both``)."""

    condition: str
    target: str
    server: str
    wall_s: float
    samples: list[RequestSample]
    setup_s: float = 0.0


class RunStats(msgspec.Struct, frozen=True, kw_only=True):
    condition: str
    target: str
    server: str
    wall_s: float
    requests: int
    errors: int
    p50_s: float
    p95_s: float
    mean_s: float
    completion_tokens: int
    load_s: float | None
    queue_wait_s: float | None


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values``, linearly interpolated between closest ranks
    (numpy's default); 0.0 for no values."""
    if not values:
        return 0.0
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def run_stats(run: TargetRun) -> RunStats:
    """Latency percentiles of the successful requests, totals, and SwapOS's own timings."""
    ok = [s for s in run.samples if s.error is None]
    lat = [s.latency_s for s in ok]
    loads = [s.load_s for s in ok if s.load_s is not None]
    waits = [s.queue_wait_s for s in ok if s.queue_wait_s is not None]
    return RunStats(
        condition=run.condition,
        target=run.target,
        server=run.server,
        wall_s=run.wall_s,
        requests=len(run.samples),
        errors=len(run.samples) - len(ok),
        p50_s=percentile(lat, 0.5),
        p95_s=percentile(lat, 0.95),
        mean_s=sum(lat) / len(lat) if lat else 0.0,
        completion_tokens=sum(s.completion_tokens for s in ok),
        load_s=sum(loads) if loads else None,
        queue_wait_s=sum(waits) if waits else None,
    )


def targets(stats: Sequence[RunStats]) -> list[TargetCheck]:
    """Issue 11's targets for every condition measured on both sides, and the live page's
    cost where ``page`` ran beside ``swapos``; a side with failed requests misses them all
    (its wall is not the trace's). A target run more than once counts its summed walls."""
    by = {(s.condition, s.target): s for s in _summed(stats)}
    checks: list[TargetCheck] = []
    for cond, limits in (("one", (("wall", ONE_WALL), ("p95", ONE_P95))),
                         ("both", (("wall", BOTH_WALL),))):  # fmt: skip
        ours, peer = by.get((cond, "swapos")), by.get((cond, "peer"))
        if ours is None or peer is None:
            continue
        for what, limit in limits:
            a, b = (ours.wall_s, peer.wall_s) if what == "wall" else (ours.p95_s, peer.p95_s)
            ratio = a / b if b > 0 else math.inf
            errors = ours.errors + peer.errors
            detail = f"swapos {a:.2f}s / peer {b:.2f}s"
            if errors:
                detail += f"; {errors} failed requests"
            checks.append(TargetCheck(
                name=f"swapos {what} / peer {what} <=", condition=cond, value=ratio,
                limit=limit, met=ratio <= limit and not errors, detail=detail,
            ))  # fmt: skip
    return checks + _page_checks(by)


def _summed(stats: Sequence[RunStats]) -> list[RunStats]:
    """One row per (condition, target): the walls and errors of its runs summed, the
    latencies of its first run."""
    rows: dict[tuple[str, str], RunStats] = {}
    for s in stats:
        key = (s.condition, s.target)
        seen = rows.get(key)
        rows[key] = s if seen is None else msgspec.structs.replace(
            seen, wall_s=seen.wall_s + s.wall_s, errors=seen.errors + s.errors
        )  # fmt: skip
    return list(rows.values())


def _page_checks(by: dict[tuple[str, str], RunStats]) -> list[TargetCheck]:
    """The live page costs the server nothing measurable: ``page`` wall / ``swapos`` wall."""
    checks = []
    for (cond, target), page in sorted(by.items()):
        ours = by.get((cond, "swapos"))
        if target != "page" or ours is None:
            continue
        ratio = page.wall_s / ours.wall_s if ours.wall_s > 0 else math.inf
        errors = page.errors + ours.errors
        detail = f"page {page.wall_s:.2f}s / swapos {ours.wall_s:.2f}s"
        if errors:
            detail += f"; {errors} failed requests"
        checks.append(TargetCheck(
            name="page wall / swapos wall <=", condition=cond, value=ratio, limit=PAGE_COST,
            met=ratio <= PAGE_COST and not errors, detail=detail,
        ))  # fmt: skip
    return checks
