"""``bench slots``: its statistics against the cost curve's prediction, its clients' prompts,
the arms' interleaving and the one-model profile it serves (no server started here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from swapos.bench.serve.servers import llama_server_launch
from swapos.bench.serve.stats import RequestSample
from swapos.bench.slots.command import (
    arm_order,
    build_args,
    client_sessions,
    markdown,
    one_model_profile,
    warm_up,
)
from swapos.bench.slots.stats import SlotsRun, arm_rates, comparisons
from swapos.models.bundled import resolve_profile
from swapos.models.resolve import model_specs
from swapos.models.spec import ModelSpec

CURVE = {2: 1.55, 4: 2.00, 8: 2.99}


def _run(arm: str, clients: int, wall: float, *, slots: int = 1, errors: int = 0) -> SlotsRun:
    samples = [
        RequestSample(session=i, round=0, role="editor", model="m", start_s=0.0, latency_s=1.0,
                      completion_tokens=128, error="HTTP 500" if i < errors else None)
        for i in range(clients)
    ]  # fmt: skip
    return SlotsRun(model="m", arm=arm, clients=clients, slots=slots, round=0, wall_s=wall,
                    samples=samples)  # fmt: skip


def test_rates_pool_rounds_and_count_failures_apart() -> None:
    runs = [_run("one", 2, 10.0), _run("one", 2, 20.0, errors=1), _run("slots", 2, 10.0)]
    one, slots = arm_rates(runs)
    assert (one.requests, one.errors, one.wall_s) == (3, 1, 30.0)
    assert one.requests_per_min == pytest.approx(6.0)
    assert one.tokens_per_s == pytest.approx(3 * 128 / 30)
    assert slots.requests_per_min == pytest.approx(12.0)


def test_slots_are_compared_with_one_at_a_time_and_the_curves_prediction() -> None:
    runs = [
        _run("one", 4, 40.0), _run("slots", 4, 20.0, slots=8),  # x2.0, predicted x2.0
        _run("one", 2, 20.0), _run("slots", 2, 19.0, slots=8),  # x1.05, predicted x1.29
        _run("one", 8, 80.0), _run("slots", 8, 90.0, slots=8), _run("peer", 8, 85.0),
        _run("server", 8, 60.0, slots=8),
    ]  # fmt: skip
    got = {c.clients: c for c in comparisons(arm_rates(runs), {"m": CURVE})}
    assert got[4].ratio == pytest.approx(2.0) and got[4].predicted == pytest.approx(2.0)
    assert got[4].within and got[4].not_below_one
    assert got[2].within is False and got[2].not_below_one
    assert got[8].not_below_one is False and got[8].peer_requests_per_min == pytest.approx(
        60 * 8 / 85
    )
    assert got[8].server_requests_per_min == pytest.approx(60 * 8 / 60)
    assert got[4].peer_requests_per_min is None and got[4].server_requests_per_min is None
    assert comparisons(arm_rates(runs), {})[0].predicted is None  # nothing measured


def test_a_side_with_failed_requests_is_not_compared() -> None:
    runs = [_run("one", 2, 20.0), _run("slots", 2, 10.0, slots=2, errors=1)]
    assert comparisons(arm_rates(runs), {"m": CURVE}) == []


def test_every_prompt_differs_and_asks_for_max_tokens() -> None:
    sessions = client_sessions("m", 3, 2, 128, offset=5)
    prompts = [r.messages[0].content for s in sessions for r in s]
    assert len(sessions) == 3 and all(len(s) == 2 for s in sessions)
    assert len(set(prompts)) == 6
    assert {r.max_tokens for s in sessions for r in s} == {128}


def test_the_warm_up_prompt_is_none_of_the_measured_ones() -> None:
    (warm,) = warm_up("m")
    measured = {r.messages[0].content for s in client_sessions("m", 8, 3, 128) for r in s}
    assert warm[0].max_tokens == 1 and warm[0].messages[0].content not in measured


def test_the_arms_order_rotates_with_round_and_clients() -> None:
    arms = ["one", "slots", "peer"]
    assert arm_order(arms, 0, 0) == arms
    assert arm_order(arms, 0, 1) == ["slots", "peer", "one"]
    assert arm_order(arms, 1, 1) == ["peer", "one", "slots"]


def test_the_one_model_profile_serves_the_file_preloaded(tmp_path: Path) -> None:
    spec = ModelSpec(name="small", path='/models/a "b".gguf', n_batch=64, n_threads=2)
    path = tmp_path / "p.toml"
    path.write_text(one_model_profile(spec, 1024))
    profile = resolve_profile(str(path))
    assert profile.mode == "resident" and list(profile.models) == ["small"]
    got = model_specs(profile)["small"]
    assert (got.path, got.n_ctx, got.n_batch, got.n_threads) == (spec.path, 1024, 64, 2)


def test_llama_server_serves_the_file_with_the_slots_and_swapos_load_settings(
    tmp_path: Path,
) -> None:
    spec = ModelSpec(name="small", path="/models/s.gguf", n_ctx=2048, n_batch=128, n_threads=2)
    launch = llama_server_launch(tmp_path / "llama-server", spec, 8123, slots=8,
                                 log=tmp_path / "server.log")  # fmt: skip
    argv = launch.argv
    opts = dict(zip(argv[1::2], argv[2::2], strict=False))
    assert argv[0] == str(tmp_path / "llama-server")
    assert (opts["-m"], opts["-a"], opts["--port"]) == ("/models/s.gguf", "small", "8123")
    assert (opts["-c"], opts["-np"]) == (str(2048 * 8), "8")  # -c is the slots' total
    assert (opts["-b"], opts["-ub"], opts["-t"], opts["-tb"]) == ("128", "128", "2", "2")
    assert "--no-repack" in argv and "--no-mmap" not in argv  # SwapOS's defaults
    assert launch.ready_url == "http://127.0.0.1:8123/health"
    repacked = ModelSpec(name="s", path="/s.gguf", repack=True, use_mmap=False)
    argv = llama_server_launch(tmp_path / "x", repacked, 1, slots=1, log=tmp_path / "l").argv
    assert "--no-repack" not in argv and "--no-mmap" in argv


def test_llama_server_must_name_an_executable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    with pytest.raises(SystemExit):
        build_args(["--llama-server", str(binary)])  # not executable
    assert "is not an executable file" in capsys.readouterr().err
    binary.chmod(0o755)
    assert build_args(["--llama-server", str(binary)]).llama_server == binary.resolve()
    assert build_args([]).llama_server is None


def test_defaults_are_the_issues_run() -> None:
    args = build_args([])
    assert (args.models, args.clients, args.max_tokens, args.slots) == (
        "small,large",
        [1, 2, 4, 8],
        128,
        None,
    )
    with pytest.raises(SystemExit):
        build_args(["--clients", "0,2"])


def test_the_markdown_table_has_a_row_per_comparison() -> None:
    from swapos.bench.slots.command import SlotsReport

    runs = [_run("one", 2, 20.0), _run("slots", 2, 10.0, slots=2)]
    rates = arm_rates(runs)
    report = SlotsReport(
        host={"cpu": "test"}, command="python -m swapos.bench slots", run_at="now",
        profile="p", models={"m": "/m.gguf"}, curves={"m": CURVE}, clients=[2], slots=2,
        requests=1, max_tokens=128, n_ctx=2048, runs=runs, rates=rates,
        comparisons=comparisons(rates, {"m": CURVE}),
    )  # fmt: skip
    text = markdown(report)
    assert "| m | 2 | 6.00 | 12.00 | x2.00 | x1.29 | NO | yes | - | - |" in text
