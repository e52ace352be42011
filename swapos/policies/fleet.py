"""A fleet's decisions (``swapos serve --ray``): the routing ids a replica reports, the id a
request is routed by, the replica count, each replica's budget, and when to retry.

A fleet is a Ray Serve application whose replicas each run one SwapOS system. Ray Serve
routes a request that carries a *multiplexed model id* to a replica that reported that id
(its model multiplexing), and a request whose id no replica reports to the replicas that
report the fewest ids. So what a replica reports is its residency, as its own ledger has it:

- a model is reported while it is ready or loading there, or while requests for it wait
  there (they will load it there);
- a *session* (a conversation: the ``x-swapos-session`` header) is reported as the id
  ``model|session=key`` while the replica that served its last request still has the model
  ready: that replica holds the conversation's KV prefix.

A request is routed by its model's id, or by its session's id when a live replica reports
that id (:func:`route_for`); requests that name no model carry no id (Ray's default routing
by queue length).

Pure and synchronous: the callers pass in the snapshots.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterator, Mapping

import msgspec

SESSION_MARK = "|session="
"""Separates the model from the session in a session's routing id."""
MAX_SESSIONS = 256
"""Sessions a replica remembers (the most recently served)."""
RETRY_DELAYS_S = (0.2, 0.5, 1.0, 2.0)
"""The waits before each retry of a request whose replica died; one retry per item."""


def session_route(model: str, session: str) -> str:
    """The routing id of ``session``'s requests for ``model``."""
    return f"{model}{SESSION_MARK}{session}"


def reported_routes(
    *,
    ready: Collection[str],
    loading: Collection[str] = (),
    queued: Collection[str] = (),
    sessions: Mapping[str, str] | None = None,
) -> frozenset[str]:
    """The ids a replica reports to Ray Serve's router.

    Args:
        ready, loading: its models in those states (its ledger's snapshot).
        queued: models whose requests wait or run on it.
        sessions: session -> the model of its last request here.

    Every model that is ready, loading or queued; and every session whose model is ready.
    """
    held = set(ready) | set(loading) | set(queued)
    kept = {session_route(m, s) for s, m in (sessions or {}).items() if m in ready}
    return frozenset(held | kept)


def route_for(model: str | None, session: str | None, held: Collection[str]) -> str | None:
    """The multiplexed id of a request for ``model`` in ``session``.

    Args:
        model: the model the request names (None: it names none; no id).
        session: its session key, if any.
        held: the ids the live replicas report now.

    The session's id when a replica reports it (that replica holds its KV prefix and its
    model), else the model's id.
    """
    if model is None:
        return None
    if session:
        sticky = session_route(model, session)
        if sticky in held:
            return sticky
    return model


class ReplicaCount(msgspec.Struct, frozen=True, kw_only=True):
    """A fixed count (``low == high``) or an autoscaling range of replicas."""

    low: int
    high: int

    @property
    def fixed(self) -> bool:
        return self.low == self.high


def parse_replicas(text: str) -> ReplicaCount:
    """``N`` (N replicas) or ``MIN-MAX`` (autoscaled between them).

    Raises:
        ValueError: not a count or a range, a count below 1, or ``MAX < MIN``.
    """
    low_text, sep, high_text = text.strip().partition("-")
    try:
        low = int(low_text)
        high = int(high_text) if sep else low
    except ValueError:
        raise ValueError(f"--replicas {text!r}: give N or MIN-MAX, e.g. 2 or 1-4") from None
    if (low < 0 if sep else low < 1) or high < 1 or high < low:
        raise ValueError(
            f"--replicas {text!r}: need at least one replica and MIN <= MAX (MIN may be 0 "
            "in a range: scaled to zero when idle)"
        )
    return ReplicaCount(low=low, high=high)


def replica_budget(
    *,
    explicit: int | None,
    assigned_memory: float,
    node_memory: float,
    node_cpus: float,
    replica_cpus: float,
) -> int:
    """A replica's memory budget in bytes.

    Args:
        explicit: ``--budget`` (or the profile's budget in bytes); wins when given.
        assigned_memory: the ``memory`` resource Ray reserved for the replica (0: none).
        node_memory: its node's ``memory`` resource.
        node_cpus, replica_cpus: its node's CPUs and its own.

    Without an explicit budget: the memory Ray reserved for the replica, else its node's
    memory shared in proportion to CPUs (a replica of 2 CPUs on an 8-CPU node gets a
    quarter), so the replicas Ray packs on a node never promise more than the node has.
    """
    if explicit is not None and explicit > 0:
        return explicit
    if assigned_memory > 0:
        return int(assigned_memory)
    share = replica_cpus / node_cpus if node_cpus > 0 and replica_cpus > 0 else 1.0
    return int(node_memory * min(share, 1.0))


def retry_delay(attempt: int, *, sent: bool) -> float | None:
    """The wait before retrying a request whose replica died during ``attempt`` (0 first),
    or None: not once any byte of its response reached the client (``sent``), nor after
    the last of :data:`RETRY_DELAYS_S`."""
    if sent or attempt >= len(RETRY_DELAYS_S):
        return None
    return RETRY_DELAYS_S[attempt]


class SessionTable:
    """The sessions a replica served, newest last, at most ``limit`` (the oldest go)."""

    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self._limit = limit
        self._models: OrderedDict[str, str] = OrderedDict()

    def served(self, session: str, model: str) -> None:
        """``session``'s last request here was for ``model``."""
        self._models[session] = model
        self._models.move_to_end(session)
        while len(self._models) > self._limit:
            self._models.popitem(last=False)

    def items(self) -> Iterator[tuple[str, str]]:
        return iter(list(self._models.items()))

    def as_dict(self) -> dict[str, str]:
        return dict(self._models)

    def __len__(self) -> int:
        return len(self._models)
