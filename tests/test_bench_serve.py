"""bench serve: the trace, the statistics and targets, the peer's config, and the replay client
against an OpenAI-compatible server on loopback (asyncio and trio)."""

from __future__ import annotations

import itertools

import anyio
import pytest

from swapos.bench.serve.client import replay, request_body
from swapos.bench.serve.command import budgets, build_args, roles_of
from swapos.bench.serve.servers import peer_config
from swapos.bench.serve.stats import (
    RequestSample,
    RunStats,
    TargetRun,
    percentile,
    run_stats,
    targets,
)
from swapos.bench.serve.trace import build_trace
from swapos.errors import SwapOSError
from swapos.models.bundled import builtin_profile
from swapos.models.profile import ModelConfig, Profile
from swapos.models.spec import ModelSpec
from tests.openai_stub import StubState, stub_server


def test_each_session_alternates_architect_and_editor_for_every_round() -> None:
    trace = build_trace(3, 4, architect="large", editor="small")
    assert len(trace) == 3
    for s, session in enumerate(trace):
        assert [r.model for r in session] == ["large", "small"] * 4
        assert [(r.session, r.round) for r in session] == [(s, i // 2) for i in range(8)]
        assert {r.max_tokens for r in session if r.role == "architect"} == {64}
        assert {r.max_tokens for r in session if r.role == "editor"} == {96}


def test_each_conversation_grows_so_the_previous_prompt_is_a_prefix() -> None:
    session = build_trace(1, 3, architect="large", editor="small")[0]
    for role in ("architect", "editor"):
        convs = [r.messages for r in session if r.role == role]
        for before, after in itertools.pairwise(convs):
            assert after[: len(before)] == before
            assert [m.role for m in after[len(before) :]] == ["assistant", "user"]


def test_the_trace_is_fixed_and_sessions_differ() -> None:
    a = build_trace(3, 2, architect="large", editor="small")
    assert a == build_trace(3, 2, architect="large", editor="small")
    firsts = {s[0].messages[1].content for s in a}
    assert len(firsts) == 3
    body = request_body(a[0][0], seed=7)
    assert (body["temperature"], body["seed"], body["max_tokens"], body["stream"]) == (
        0.0,
        7,
        64,
        False,
    )


def test_a_trace_without_sessions_or_rounds_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        build_trace(0, 1, architect="a", editor="b")


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([], 0.95) == 0.0
    assert percentile([3.0], 0.95) == 3.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert percentile([float(i) for i in range(1, 21)], 0.95) == pytest.approx(19.05)


def _stats(cond: str, target: str, wall: float, p95: float, errors: int = 0) -> RunStats:
    return RunStats(
        condition=cond, target=target, server="x", wall_s=wall, requests=10, errors=errors,
        p50_s=p95 / 2, p95_s=p95, mean_s=p95 / 2, completion_tokens=0, load_s=None,
        queue_wait_s=None,
    )  # fmt: skip


def test_targets_are_met_or_missed_on_the_ratios() -> None:
    checks = targets([
        _stats("one", "swapos", 70.0, 7.0), _stats("one", "peer", 100.0, 10.0),
        _stats("both", "swapos", 106.0, 5.0), _stats("both", "peer", 100.0, 5.0),
    ])  # fmt: skip
    got = {(c.condition, c.name): (round(c.value, 3), c.met) for c in checks}
    assert got == {
        ("one", "swapos wall / peer wall <="): (0.7, True),
        ("one", "swapos p95 / peer p95 <="): (0.7, True),
        ("both", "swapos wall / peer wall <="): (1.06, False),
    }


def test_a_side_with_failed_requests_misses_its_targets() -> None:
    checks = targets(
        [_stats("one", "swapos", 10.0, 1.0, errors=1), _stats("one", "peer", 100.0, 10.0)]
    )
    assert checks and not any(c.met for c in checks)
    assert all("1 failed requests" in c.detail for c in checks)


def test_the_page_is_checked_against_swapos_alone_on_summed_walls() -> None:
    # swapos, page, swapos, page: each target's walls are summed before the ratio.
    checks = targets([
        _stats("one", "swapos", 100.0, 5.0), _stats("one", "page", 101.0, 5.0),
        _stats("one", "swapos", 100.0, 5.0), _stats("one", "page", 105.0, 5.0),
    ])  # fmt: skip
    assert [(c.name, round(c.value, 3), c.met) for c in checks] == [
        ("page wall / swapos wall <=", 1.03, False)
    ]
    assert checks[0].detail == "page 206.00s / swapos 200.00s"
    within = targets([_stats("one", "swapos", 100.0, 5.0), _stats("one", "page", 101.5, 5.0)])
    assert [c.met for c in within] == [True]


def test_targets_may_repeat_and_page_is_one() -> None:
    args = build_args(["--targets", "swapos,page,swapos,page"])
    assert args.targets == ["swapos", "page", "swapos", "page"]
    with pytest.raises(SystemExit):
        build_args(["--targets", "swapos,browser"])


def test_run_stats_leave_failed_requests_out_of_the_latencies() -> None:
    ok = RequestSample(
        session=0, round=0, role="architect", model="a", start_s=0.0, latency_s=2.0,
        completion_tokens=5, load_s=1.0, queue_wait_s=0.5,
    )  # fmt: skip
    bad = RequestSample(session=0, round=0, role="editor", model="b", start_s=2.0,
                        latency_s=99.0, error="HTTP 500")  # fmt: skip
    st = run_stats(TargetRun(condition="one", target="swapos", server="x", wall_s=3.0,
                             samples=[ok, bad]))  # fmt: skip
    assert (st.requests, st.errors, st.p95_s, st.completion_tokens) == (2, 1, 2.0, 5)
    assert (st.load_s, st.queue_wait_s) == (1.0, 0.5)


def test_the_one_model_budget_holds_either_model_but_not_both() -> None:
    limits = budgets({"large": 1000, "small": 400})
    assert 1000 <= limits["one"] < 1400 <= limits["both"]


def test_architect_and_editor_are_the_reason_and_code_models() -> None:
    assert roles_of(builtin_profile("default")) == ("large", "small")
    same = Profile(models={"m": ModelConfig(path="/m.gguf")}, roles={"reason": "m", "code": "m"})
    with pytest.raises(SwapOSError, match="same model"):
        roles_of(same)


def test_the_peer_config_serves_each_model_under_its_profile_name() -> None:
    specs = [ModelSpec(name="large", path="/l.gguf", n_ctx=4096, n_threads=2),
             ModelSpec(name="small", path="/s.gguf", n_ctx=2048, n_threads=2)]  # fmt: skip
    config = peer_config(specs, 8123)
    assert (config["host"], config["port"]) == ("127.0.0.1", 8123)
    models = config["models"]
    assert [(m["model"], m["model_alias"], m["n_ctx"]) for m in models] == [
        ("/l.gguf", "large", 4096),
        ("/s.gguf", "small", 2048),
    ]
    assert {m["n_threads"] for m in models} == {2}


def test_defaults_are_three_sessions_on_the_default_profile() -> None:
    args = build_args([])
    assert (args.profile, args.sessions, args.conditions, args.targets) == (
        "default",
        3,
        ["one", "both"],
        ["swapos", "peer"],
    )


@pytest.mark.anyio
async def test_replay_sends_every_request_concurrently_and_records_usage() -> None:
    trace = build_trace(3, 2, architect="large", editor="small", architect_tokens=4,
                        editor_tokens=4)  # fmt: skip
    state = StubState(replies={"large": ["plan one two three four five"], "small": ["edit it"]})
    with anyio.fail_after(60):
        async with stub_server(state) as base:
            wall, samples = await replay(trace, {"large": base, "small": base}, seed=3)
    assert len(samples) == 12 and all(s.error is None for s in samples)
    assert wall >= max(s.start_s + s.latency_s for s in samples) - 1e-6
    by_session = {s: [x for x in samples if x.session == s] for s in range(3)}
    for got in by_session.values():  # a session's requests go in order
        assert [(x.round, x.role) for x in got] == [
            (0, "architect"), (0, "editor"), (1, "architect"), (1, "editor")
        ]  # fmt: skip
    assert {s.completion_tokens for s in samples if s.model == "large"} == {4}
    assert {s.completion_tokens for s in samples if s.model == "small"} == {2}
    assert all(b["seed"] == 3 for b in state.requests)


@pytest.mark.anyio
async def test_a_failed_request_is_recorded_and_the_session_goes_on() -> None:
    trace = build_trace(1, 2, architect="large", editor="missing")
    state = StubState(replies={"large": ["ok"]})
    with anyio.fail_after(60):
        async with stub_server(state) as base:
            _, samples = await replay(trace, {"large": base, "missing": base})
    assert [s.error is None for s in samples] == [True, False, True, False]
    assert "HTTP 404" in (samples[1].error or "")
