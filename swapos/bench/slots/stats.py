"""``bench slots``'s statistics: requests per minute of each run, slots against one at a time,
and what the cost curve predicts (pure functions over the measured requests)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from swapos.bench.serve.stats import RequestSample, percentile
from swapos.policies.slots import predicted_speedup

WITHIN: Final = 0.10
"""Issue 54: slots' requests per minute within this share of what the cost curve predicts."""


class SlotsRun(msgspec.Struct, frozen=True, kw_only=True):
    """``clients`` concurrent clients on one model against one server (``arm``).

    Attributes:
        model: the profile's model name.
        arm: ``one`` (``swapos serve --slots 1``), ``slots`` (``--slots N``), ``peer``
            (``llama_cpp.server``: one request at a time) or ``server`` (llama.cpp's
            ``llama-server -np N``).
        clients: concurrent clients, each sending its requests one after another.
        slots: the server's slots (1 for ``one`` and ``peer``).
        round: which round of the run (the arms' order alternates by round and clients).
        wall_s: first request sent to last response.
        samples: one per request.
    """

    model: str
    arm: str
    clients: int
    slots: int
    round: int
    wall_s: float
    samples: list[RequestSample]


class ArmRate(msgspec.Struct, frozen=True, kw_only=True):
    """What one or more runs of an arm at a client count measured (their totals)."""

    model: str
    arm: str
    clients: int
    slots: int
    requests: int
    errors: int
    wall_s: float
    requests_per_min: float
    tokens_per_s: float
    mean_tokens: float
    p50_s: float


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    """Slots against one at a time at one client count.

    Attributes:
        ratio: slots' requests per minute over one at a time's.
        predicted: what the cost curve predicts for that ratio
            (:func:`~swapos.policies.slots.predicted_speedup`); None: not measured.
        within: ``ratio`` within :data:`WITHIN` of ``predicted`` (None: no prediction).
        not_below_one: slots made at least as many requests per minute as one at a time.
        peer_requests_per_min: ``llama_cpp.server``'s at the same client count, if run.
        server_requests_per_min: ``llama-server -np N``'s at the same client count, if run.
    """

    model: str
    clients: int
    slots: int
    one_requests_per_min: float
    slots_requests_per_min: float
    ratio: float
    predicted: float | None
    within: bool | None
    not_below_one: bool
    peer_requests_per_min: float | None = None
    server_requests_per_min: float | None = None


def arm_rates(runs: Sequence[SlotsRun]) -> list[ArmRate]:
    """Per (model, arm, clients), in the order first seen: the runs' requests and walls
    summed (rounds pooled), failed requests counted apart."""
    groups: dict[tuple[str, str, int], list[SlotsRun]] = {}
    for run in runs:
        groups.setdefault((run.model, run.arm, run.clients), []).append(run)
    out = []
    for (model, arm, clients), group in groups.items():
        samples = [s for run in group for s in run.samples]
        ok = [s for s in samples if s.error is None]
        wall = sum(run.wall_s for run in group)
        tokens = sum(s.completion_tokens for s in ok)
        out.append(ArmRate(
            model=model, arm=arm, clients=clients, slots=group[0].slots, requests=len(ok),
            errors=len(samples) - len(ok), wall_s=wall,
            requests_per_min=60.0 * len(ok) / wall if wall > 0 else 0.0,
            tokens_per_s=tokens / wall if wall > 0 else 0.0,
            mean_tokens=tokens / len(ok) if ok else 0.0,
            p50_s=percentile([s.latency_s for s in ok], 0.5) if ok else 0.0,
        ))  # fmt: skip
    return out


def comparisons(
    rates: Sequence[ArmRate], curves: Mapping[str, Mapping[int, float]]
) -> list[Comparison]:
    """Slots against one at a time per (model, clients) where both ran; ``curves``: each
    model's measured cost curve (empty: no prediction)."""
    by = {(r.model, r.arm, r.clients): r for r in rates}
    out = []
    for (model, arm, clients), slots in by.items():
        one = by.get((model, "one", clients))
        if arm != "slots" or one is None or one.requests_per_min <= 0:
            continue
        if slots.errors or one.errors:
            continue
        ratio = slots.requests_per_min / one.requests_per_min
        predicted = predicted_speedup(curves.get(model, {}), clients, slots.slots)
        peer, server = by.get((model, "peer", clients)), by.get((model, "server", clients))
        out.append(Comparison(
            model=model, clients=clients, slots=slots.slots,
            one_requests_per_min=one.requests_per_min,
            slots_requests_per_min=slots.requests_per_min, ratio=ratio, predicted=predicted,
            within=None if predicted is None else abs(ratio / predicted - 1.0) <= WITHIN,
            not_below_one=ratio >= 1.0,
            peer_requests_per_min=peer.requests_per_min if peer is not None else None,
            server_requests_per_min=server.requests_per_min if server is not None else None,
        ))  # fmt: skip
    return out
