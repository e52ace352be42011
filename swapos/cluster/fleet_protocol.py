"""What a fleet's deployments send each other, as msgspec Structs (msgpack on the wire).

The front forwards each HTTP request to a replica as a :class:`ForwardedRequest`; the
replica streams the app's response back as :data:`ResponsePart` items (the ASGI
``http.response.start`` and ``http.response.body`` messages). Replicas send the shared
state their :class:`ReplicaReport` and their requests' model sequence
(:class:`Observation`); the front reads the :class:`FleetView`. Everything a deployment is
built from is one :class:`FleetConfig`.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from swapos.models.profile import Mode, Profile
from swapos.policies.fleet import ReplicaCount
from swapos.serve.state import ServeSettings

Routing = Literal["model", "none"]
SESSION_HEADER = "x-swapos-session"
"""The request header that names a conversation (its requests stick to one replica)."""


class FleetConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A fleet: what its replicas serve and how Ray Serve runs them.

    Attributes:
        name: the Ray Serve application's name.
        profile: the models every replica serves (every node resolves the same files).
        mode: the swap mode (None: the profile's).
        budget_bytes: each replica's memory budget, also reserved as Ray's ``memory``
            resource so Ray places replicas where it fits (None: from the node's resources,
            :func:`~swapos.policies.fleet.replica_budget`).
        settings: the server's settings (``ServeSettings``), the same on every replica.
        kv_dir: the KV cache's disk tier on each node (a shared mount lets a conversation's
            KV state follow it to another replica); None: RAM only.
        event_log: each replica writes ``<stem>-<replica><suffix>`` beside this path on its
            own node (None: no log).
        preload: models each replica loads before it takes requests.
        routing: ``model`` (by residency, Ray Serve's multiplexed ids) or ``none`` (Ray's
            default routing by queue length: what a balancer in front of servers does).
        replicas: a fixed count, or a range Ray Serve autoscales within.
        replica_cpus, replica_gpus: Ray resources of each replica (its models use its CPUs
            as threads unless the profile sets ``threads``).
        replica_queue: requests a replica holds at once (Ray Serve's
            ``max_ongoing_requests``): beyond it, Ray sends a request elsewhere.
        target_queue: the autoscaler's ``target_ongoing_requests`` per replica.
    """

    name: str = "swapos"
    profile: Profile
    mode: Mode | None = None
    budget_bytes: int | None = None
    settings: ServeSettings = msgspec.field(default_factory=ServeSettings)
    kv_dir: str | None = None
    event_log: str | None = None
    preload: list[str] = msgspec.field(default_factory=list)
    routing: Routing = "model"
    replicas: ReplicaCount = msgspec.field(default_factory=lambda: ReplicaCount(low=1, high=1))
    replica_cpus: float = 1.0
    replica_gpus: float = 0.0
    replica_queue: int = 32
    target_queue: float = 2.0


class ForwardedRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One HTTP request as the front received it, with what it is routed by."""

    method: str
    path: str
    query: bytes = b""
    headers: list[tuple[bytes, bytes]] = msgspec.field(default_factory=list)
    body: bytes = b""
    client: tuple[str, int] | None = None
    model: str | None = None
    session: str | None = None


class ResponseStart(msgspec.Struct, frozen=True, kw_only=True, tag="start"):
    status: int
    headers: list[tuple[bytes, bytes]]


class ResponseBody(msgspec.Struct, frozen=True, kw_only=True, tag="body"):
    body: bytes
    more: bool


ResponsePart = ResponseStart | ResponseBody


class Observation(msgspec.Struct, frozen=True, array_like=True):
    """A request of client ``key`` ("" anonymous) for ``model`` arrived at a replica."""

    key: str
    model: str


class ReplicaReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a replica tells the fleet's shared state, on every change and every second.

    Attributes:
        replica: its Ray Serve replica id.
        node: its host.
        routes: the multiplexed ids it reports to Ray Serve now.
        ready: its resident models.
        sessions: session -> model of the sessions it holds (model ready).
        queues: model -> its requests waiting or running there (models with any).
        loads, evictions: its ledger's counters since it started.
        requests: requests it answered.
        budget_bytes, used_bytes: its budget and what its models take now.
    """

    replica: str
    node: str = ""
    routes: list[str] = msgspec.field(default_factory=list)
    ready: list[str] = msgspec.field(default_factory=list)
    sessions: dict[str, str] = msgspec.field(default_factory=dict)
    queues: dict[str, int] = msgspec.field(default_factory=dict)
    loads: int = 0
    evictions: int = 0
    requests: int = 0
    budget_bytes: int = 0
    used_bytes: int = 0


class ReplicaSeen(msgspec.Struct, frozen=True, kw_only=True):
    """A replica's last report, how long ago it came, and whether it counts as live."""

    report: ReplicaReport
    age_s: float
    live: bool


class FleetView(msgspec.Struct, frozen=True, kw_only=True):
    """The shared state's view: every replica that reported, live ones first."""

    replicas: list[ReplicaSeen] = msgspec.field(default_factory=list)
    observations: int = 0

    def held_routes(self) -> frozenset[str]:
        """Every id the live replicas report."""
        return frozenset(r for s in self.replicas if s.live for r in s.report.routes)


_ENCODER = msgspec.msgpack.Encoder()
REQUEST = msgspec.msgpack.Decoder(ForwardedRequest)
PART = msgspec.msgpack.Decoder(ResponsePart)
CONFIG = msgspec.msgpack.Decoder(FleetConfig)
REPORT = msgspec.msgpack.Decoder(ReplicaReport)
VIEW = msgspec.msgpack.Decoder(FleetView)
OBSERVATIONS = msgspec.msgpack.Decoder(list[Observation])
COUNTS = msgspec.msgpack.Decoder(dict[str, dict[str, dict[str, int]]])


def encode(value: object) -> bytes:
    """``value`` as msgpack."""
    return _ENCODER.encode(value)
