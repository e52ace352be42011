"""What a lease's requester waited for: the timing arithmetic of a lease, as pure functions.

Times are clock readings (seconds); intervals are ``(start, end)`` pairs.
"""

from __future__ import annotations

import msgspec

Interval = tuple[float, float]


class LeaseWait(msgspec.Struct, frozen=True, kw_only=True):
    """``load_s``: waited for a load (joined or started); ``evict_s``: waited for victims to
    close; ``load_hidden_s``: load work done by a prefetch before the request."""

    load_s: float
    evict_s: float
    load_hidden_s: float


def overlap(a: Interval, b: Interval) -> float:
    """Length of the intersection of two intervals (0 when they do not meet)."""
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


def lease_wait(
    *,
    requested: float,
    ready: float,
    was_ready: bool,
    room: Interval,
    load: Interval,
    started_speculative: bool,
    hidden_credit_s: float,
) -> LeaseWait:
    """Split the time from ``requested`` to ``ready`` into eviction and load.

    Args:
        requested: when the lease was asked for.
        ready: when the model was ready for it.
        was_ready: the model was resident when asked (nothing waited for).
        room: when the model's last load made room (victims closing).
        load: when the model's last load ran.
        started_speculative: a prefetch started that load.
        hidden_credit_s: a finished prefetch's load time, credited to its first user only.

    Returns:
        The wait. A request that joined a prefetch in flight is credited with the part of the
        load done before it asked; one that found a prefetched model ready, with the credit.
    """
    if was_ready:
        return LeaseWait(load_s=0.0, evict_s=0.0, load_hidden_s=hidden_credit_s)
    evict_s = overlap((requested, ready), room)
    load_s = max(0.0, ready - requested - evict_s)
    hidden = hidden_credit_s
    if started_speculative and load[0] < requested:  # joined a prefetch in flight
        hidden = max(hidden, min(requested, load[1]) - load[0])
    return LeaseWait(load_s=load_s, evict_s=evict_s, load_hidden_s=hidden)
