"""The fleet's decisions (swapos/policies/fleet.py), its deployment options, its wire
format, and the multiplexed table kept in step with a replica's ledger: no Ray needed."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import msgspec
import pytest

from swapos.cluster.fleet_protocol import (
    CONFIG,
    PART,
    REPORT,
    REQUEST,
    FleetConfig,
    ForwardedRequest,
    ReplicaReport,
    ResponseBody,
    ResponseStart,
    encode,
)
from swapos.cluster.fleet_replica import replica_log
from swapos.cluster.ray_fleet import replica_options, sync_multiplexed
from swapos.policies.fleet import (
    RETRY_DELAYS_S,
    ReplicaCount,
    SessionTable,
    parse_replicas,
    replica_budget,
    reported_routes,
    retry_delay,
    route_for,
    session_route,
)
from swapos.policies.serving import Transitions
from swapos.serve.state import ServeSettings
from tests.fleet_fakes import profile

GiB = 2**30


def test_a_replica_reports_its_models_and_the_sessions_whose_model_is_ready() -> None:
    routes = reported_routes(
        ready={"a", "b"},
        loading={"c"},
        queued={"d", "a"},
        sessions={"s1": "a", "s2": "c", "s3": "z"},
    )
    assert routes == {"a", "b", "c", "d", session_route("a", "s1")}
    assert reported_routes(ready=()) == frozenset()


@pytest.mark.parametrize(
    ("model", "session", "held", "expected"),
    [
        (None, None, set(), None),  # names no model: Ray's default routing
        (None, "s", {session_route("a", "s")}, None),
        ("a", None, set(), "a"),
        ("a", "s", set(), "a"),  # a new session goes by its model
        ("a", "s", {session_route("a", "s")}, session_route("a", "s")),
        ("b", "s", {session_route("a", "s")}, "b"),  # the session held for another model
        ("a", "", {session_route("a", "")}, "a"),
    ],
)
def test_a_request_is_routed_by_its_session_when_a_replica_holds_it(
    model: str | None, session: str | None, held: set[str], expected: str | None
) -> None:
    assert route_for(model, session, held) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2", (2, 2)), ("1-4", (1, 4)), (" 3 ", (3, 3)), ("0-2", (0, 2)), ("2-2", (2, 2))],
)
def test_replicas_are_a_count_or_a_range(text: str, expected: tuple[int, int]) -> None:
    count = parse_replicas(text)
    assert (count.low, count.high) == expected
    assert count.fixed == (expected[0] == expected[1])


@pytest.mark.parametrize("text", ["0", "x", "-1", "3-1", "0-0", "", "1-"])
def test_a_bad_replica_count_is_refused_by_name(text: str) -> None:
    with pytest.raises(ValueError, match="--replicas"):
        parse_replicas(text)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"explicit": 3 * GiB, "assigned_memory": 5 * GiB}, 3 * GiB),
        ({"explicit": None, "assigned_memory": 5 * GiB}, 5 * GiB),
        ({"explicit": None, "assigned_memory": 0}, 4 * GiB),  # 2 of the node's 8 CPUs
        ({"explicit": None, "assigned_memory": 0, "replica_cpus": 16}, 16 * GiB),
        ({"explicit": None, "assigned_memory": 0, "node_cpus": 0}, 16 * GiB),
    ],
)
def test_a_replicas_budget_comes_from_its_nodes_resources(
    kwargs: dict[str, Any], expected: int
) -> None:
    args: dict[str, Any] = {"node_memory": 16 * GiB, "node_cpus": 8, "replica_cpus": 2}
    assert replica_budget(**{**args, **kwargs}) == expected


def test_a_request_is_retried_only_before_its_answer_began() -> None:
    delays = [retry_delay(i, sent=False) for i in range(len(RETRY_DELAYS_S) + 1)]
    assert delays == [*RETRY_DELAYS_S, None]
    assert retry_delay(0, sent=True) is None


def test_a_replica_remembers_its_newest_sessions() -> None:
    table = SessionTable(limit=2)
    for session, model in [("s1", "a"), ("s2", "b"), ("s1", "c"), ("s3", "a")]:
        table.served(session, model)
    assert table.as_dict() == {"s1": "c", "s3": "a"} and len(table) == 2


def test_transitions_travel_as_plain_counts() -> None:
    seen = Transitions()
    for key, model in [("k", "a"), ("k", "b"), ("j", "a"), ("j", "c"), ("k", "a"), ("k", "b")]:
        seen.observe(key, model)
    again = Transitions.from_counts(msgspec.msgpack.decode(encode(seen.counts())))
    assert again.counts() == seen.counts()
    assert [again.predict(k, "a") for k in ("k", "j", "x")] == ["b", "c", "b"]


def test_fixed_and_autoscaled_replicas_become_ray_serve_options() -> None:
    fixed = replica_options(
        FleetConfig(profile=profile(), replicas=ReplicaCount(low=2, high=2), budget_bytes=GiB,
                    replica_gpus=1.0),
        {"runtime_env": {"env_vars": {"A": "1"}}},
    )  # fmt: skip
    assert fixed["num_replicas"] == 2 and "autoscaling_config" not in fixed
    assert fixed["max_ongoing_requests"] == 32
    assert fixed["ray_actor_options"] == {
        "num_cpus": 1.0, "num_gpus": 1.0, "memory": GiB,
        "runtime_env": {"env_vars": {"A": "1"}},
    }  # fmt: skip
    scaled = replica_options(
        FleetConfig(profile=profile(), replicas=ReplicaCount(low=0, high=4), target_queue=3)
    )
    assert "num_replicas" not in scaled
    assert scaled["autoscaling_config"] == {
        "min_replicas": 0, "max_replicas": 4, "initial_replicas": 1,
        "target_ongoing_requests": 3,
    }  # fmt: skip
    assert scaled["ray_actor_options"] == {"num_cpus": 1.0}


class _Wrapper:
    """The two attributes of Ray Serve's multiplex wrapper that the fleet uses."""

    def __init__(self, *ids: str) -> None:
        self.models: OrderedDict[str, str] = OrderedDict((i, i) for i in ids)
        self._push_multiplexed_replica_info = False


def test_the_multiplexed_table_follows_the_ledger() -> None:
    wrapper = _Wrapper("a", "starting")
    assert sync_multiplexed(wrapper, frozenset({"a", "b"}))
    assert list(wrapper.models) == ["a", "b"] and wrapper._push_multiplexed_replica_info
    wrapper._push_multiplexed_replica_info = False
    assert not sync_multiplexed(wrapper, frozenset({"a", "b"}))
    assert not wrapper._push_multiplexed_replica_info
    assert sync_multiplexed(wrapper, frozenset())
    assert not wrapper.models


def test_every_fleet_message_round_trips() -> None:
    settings = ServeSettings(api_key="k", cors_origins=("*",))
    config = FleetConfig(
        profile=profile(), budget_bytes=GiB, settings=settings, preload=["m0"],
        replicas=ReplicaCount(low=1, high=3), kv_dir="/mnt/kv",
    )  # fmt: skip
    request = ForwardedRequest(
        method="POST", path="/v1/chat/completions", query=b"a=1",
        headers=[(b"content-type", b"application/json")], body=b"{}", client=("1.2.3.4", 5),
        model="m0", session="s",
    )  # fmt: skip
    report = ReplicaReport(replica="r", routes=["a"], sessions={"s": "a"}, loads=3)
    assert CONFIG.decode(encode(config)) == config
    assert REQUEST.decode(encode(request)) == request
    assert REPORT.decode(encode(report)) == report
    for part in (
        ResponseStart(status=200, headers=[(b"x", b"y")]),
        ResponseBody(body=b"z", more=True),
    ):
        assert PART.decode(encode(part)) == part


def test_each_replica_writes_its_own_event_log() -> None:
    assert replica_log("/logs/events.jsonl", "abc") == "/logs/events-abc.jsonl"
    assert replica_log(None, "abc") is None


def test_the_serve_command_describes_a_fleet() -> None:
    from swapos.cluster.fleet_cli import fleet_config
    from swapos.errors import SwapOSError
    from swapos.serve.cli import build_parser

    argv = ["--ray", "--replicas", "1-3", "--replica-cpus", "4", "--event-log", "/l/ev.jsonl"]
    args = build_parser().parse_args(argv)
    settings = ServeSettings(api_key="k")
    config = fleet_config(args, profile(), settings, budget=GiB, preload=["m0"], kv_dir=None)
    assert args.ray == "" and config.replicas == ReplicaCount(low=1, high=3)
    assert (config.replica_cpus, config.budget_bytes, config.preload) == (4.0, GiB, ["m0"])
    assert config.settings == settings and config.event_log == "/l/ev.jsonl"
    assert build_parser().parse_args(["--ray", "head:6379"]).ray == "head:6379"
    assert build_parser().parse_args([]).ray is None
    for bad in (["--replicas", "0"], ["--async-backend", "trio"], ["--replica-cpus", "0"]):
        with pytest.raises(SwapOSError):
            fleet_config(
                build_parser().parse_args(["--ray", *bad]), profile(), settings,
                budget=None, preload=[], kv_dir=None,
            )  # fmt: skip


def test_the_fleet_bench_trace_pairs_neighbouring_models() -> None:
    from swapos.bench.serve.fleet import fleet_trace

    trace = fleet_trace(["a", "b", "c"], sessions=3, rounds=2, tokens=(4, 5))
    assert [[r.model for r in s] for s in trace] == [
        ["a", "b", "a", "b"], ["b", "c", "b", "c"], ["c", "a", "c", "a"],
    ]  # fmt: skip
    assert [r.max_tokens for r in trace[0]] == [4, 5, 4, 5]
    assert {r.session for r in trace[1]} == {1}
    assert trace[0][0].messages != trace[1][0].messages


def test_the_fleet_bench_budget_holds_two_models_never_three() -> None:
    from swapos.bench.serve.fleet import budget_for_two
    from swapos.errors import SwapOSError

    sizes = {"a": 100, "b": 300, "c": 200}
    budget = budget_for_two(sizes)
    assert budget >= 300 + 200 and budget < 100 + 200 + 300
    with pytest.raises(SwapOSError, match="three models"):
        budget_for_two({"a": 1, "b": 2})


def test_each_fleet_bench_arm_deploys_its_fleets() -> None:
    from swapos.bench.serve.fleet import arm_configs

    base = FleetConfig(profile=profile(), budget_bytes=GiB)
    shapes = {
        arm: [
            (c.name, c.replicas.low, c.replicas.high, c.budget_bytes)
            for c in arm_configs(arm, base, 2)
        ]
        for arm in ("fleet", "one", "rr")
    }
    assert shapes == {
        "fleet": [("bench-fleet", 2, 2, GiB)],
        "one": [("bench-one", 1, 1, GiB)],
        "rr": [("bench-rr0", 1, 1, GiB), ("bench-rr1", 1, 1, GiB)],
    }
