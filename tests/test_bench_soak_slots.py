"""``bench soak-slots``: the stream reader, the seeded plan, the checks on counts, RSS, idle
slots and the event log, each shown catching what it is for; and a few seconds of the whole
soak on the fake backend (a ``swapos serve`` subprocess on loopback) passing its checks."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from swapos.bench import cli
from swapos.bench.soak_slots.checks import (
    MIB,
    Outcome,
    RssSample,
    audit_log,
    counts,
    idle_problems,
    rss_check,
    vmrss_bytes,
)
from swapos.bench.soak_slots.plan import chat_body, client_rng, draw_action, prompt
from swapos.bench.soak_slots.sampling import KVTally
from swapos.bench.soak_slots.stream import StreamReader
from swapos.data.generation import GenerationStats
from swapos.messages.events import AnyEvent, GenerationFinished, TaskFinished, TaskStarted


def _chunk(rid: str, content: str | None = None, *, finish: str | None = None) -> str:
    body: dict[str, object] = {
        "id": rid,
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
    }
    if finish is not None:
        body["usage"] = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    return "data: " + json.dumps(body)


def _read(lines: list[str]) -> StreamReader:
    reader = StreamReader()
    for line in lines:
        reader.feed(line)
    return reader


def test_a_well_formed_stream_completes_with_its_id_chunks_and_tokens() -> None:
    lines = [_chunk("c-1", ""), "", ": queued, position 2", _chunk("c-1", "a"), "",
             _chunk("c-1", " b"), _chunk("c-1", finish="length"), "data: [DONE]", ""]  # fmt: skip
    reader = _read(lines)
    assert reader.complete and reader.problem is None
    assert (reader.response_id, reader.content_chunks, reader.tokens) == ("c-1", 2, 2)


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        ([_chunk("c-1", "a"), 'data: {"error": {"message": "boom"}}'], "error event: boom"),
        ([_chunk("c-1", "a"), _chunk("c-2", "b")], "chunk id 'c-2'"),
        ([_chunk("c-1", finish="stop"), "data: [DONE]", _chunk("c-1", "x")], "after [DONE]"),
        (["data: {not json"], "does not decode"),
        (["event: x"], "not an SSE line"),
        ([_chunk("c-1", "a"), "data: [DONE]"], "[DONE] before"),
        ([_chunk("c-1", finish="stop"), _chunk("c-1", "late")], "after the one with"),
    ],
)
def test_a_malformed_stream_names_its_first_problem(lines: list[str], problem: str) -> None:
    reader = _read(lines)
    assert not reader.complete
    assert reader.problem is not None and problem in reader.problem


def test_a_stream_cut_before_done_is_not_complete() -> None:
    reader = _read([_chunk("c-1", "a"), _chunk("c-1", finish="stop")])
    assert reader.problem is None and not reader.complete


def test_the_plan_is_seeded_per_client_and_draws_the_shares_asked() -> None:
    def draws(seed: int, client: int) -> list[str]:
        rng = client_rng(seed, client)
        return [draw_action(rng, disconnect=0.2, cancel=0.1, max_tokens=64).kind
                for _ in range(2000)]  # fmt: skip

    assert draws(0, 3) == draws(0, 3) and draws(0, 3) != draws(0, 4) != draws(1, 4)
    kinds = draws(7, 0)
    assert 0.17 < kinds.count("disconnect") / 2000 < 0.23
    assert 0.07 < kinds.count("cancel") / 2000 < 0.13
    rng = client_rng(0, 0)
    actions = [draw_action(rng, disconnect=1.0, cancel=0.0, max_tokens=64) for _ in range(200)]
    assert {a.kind for a in actions} == {"disconnect"}
    assert min(a.after_chunks for a in actions) >= 1 and max(a.after_chunks for a in actions) <= 32


def test_every_request_has_a_prompt_of_its_own_naming_its_id() -> None:
    prompts = {prompt(n) for n in range(500)}
    assert len(prompts) == 500 and "[soak-000042]" in prompt(42)
    body = chat_body("small", 1, 64)
    assert body["stream"] is True and body["temperature"] == 0.0 and body["max_tokens"] == 64


def _outcome(n: int, result: str, rid: str | None, tokens: int = 0) -> Outcome:
    return msgspec.convert(
        {"request_id": f"soak-{n}", "client": 0, "action": "complete", "result": result,
         "start_s": float(n), "latency_s": float(n), "response_id": rid, "tokens": tokens},
        Outcome,
    )  # fmt: skip


def test_counts_add_up_and_take_latency_from_completed_requests_only() -> None:
    outcomes = [_outcome(1, "completed", "a", 10), _outcome(3, "completed", "b", 20),
                _outcome(100, "disconnected", "c"), _outcome(50, "cancelled", None),
                _outcome(2, "error", None)]  # fmt: skip
    c = counts(outcomes, wall_s=10.0)
    assert (c.sent, c.completed, c.disconnected, c.cancelled, c.errors) == (5, 2, 1, 1, 1)
    assert c.p50_s == pytest.approx(2.0) and c.p99_s == pytest.approx(2.98)
    assert c.tokens_per_s == pytest.approx(3.0)


def _task(tid: str, *, tokens: int | None = 2, error: str | None = None) -> list[AnyEvent]:
    stats = GenerationStats(prompt_tokens=3, prefill_tokens=3, kv_restored_tokens=0,
                            prefill_s=0.1, ttft_s=0.1, tokens=tokens or 0, gen_s=0.1,
                            stop_reason="length")  # fmt: skip
    events: list[AnyEvent] = [TaskStarted(t=0.0, task_id=tid, run_id=f"run-{tid}")]
    if tokens is not None:
        events.append(GenerationFinished(t=1.0, task_id=tid, stats=stats))
    events.append(TaskFinished(t=1.0, task_id=tid, run_id=f"run-{tid}", passed=False,
                               error=error))  # fmt: skip
    return events


def test_the_log_audit_passes_a_consistent_log() -> None:
    events = _task("a") + _task("b", tokens=None, error="cancelled") + _task("warm")
    outcomes = [_outcome(1, "completed", "a", 2), _outcome(2, "disconnected", "b")]
    audit = audit_log(events, outcomes, extra=1)
    assert audit.ok and audit.tasks == 3 and audit.unmatched_tasks == 1


def test_the_log_audit_catches_a_request_answered_twice_lost_or_unfinished() -> None:
    twice = _task("a") + _task("a")[1:]
    assert audit_log(twice, [_outcome(1, "completed", "a", 2)], extra=0).answered_twice == ["a"]
    shared = _task("a")
    two = [_outcome(1, "completed", "a", 2), _outcome(2, "completed", "a", 2)]
    assert audit_log(shared, two, extra=0).answered_twice == ["a"]
    lost = audit_log(_task("a", error="boom"), [_outcome(1, "completed", "a", 2)], extra=0)
    assert lost.lost == ["soak-1"] and not lost.ok
    assert audit_log([], [_outcome(1, "completed", "a", 2)], extra=0).lost == ["soak-1"]
    unfinished = audit_log(_task("a")[:1], [], extra=1)
    assert unfinished.unfinished == ["a"] and not unfinished.ok
    wrong = audit_log(_task("a", tokens=5), [_outcome(1, "completed", "a", 2)], extra=0)
    assert wrong.token_mismatch == ["soak-1"]
    phantom = audit_log(_task("x") + _task("y"), [_outcome(1, "cancelled", None)], extra=0)
    assert phantom.too_many_tasks and not phantom.ok


def test_rss_is_flat_when_it_grows_within_tolerance_after_warm_up() -> None:
    def samples(*mib: float, kv: tuple[float, ...] = ()) -> list[RssSample]:
        kvs = kv or (0.0,) * len(mib)
        return [RssSample(t_s=10.0 * i, rss_bytes=int(m * MIB), kv_ram_bytes=int(k * MIB))
                for i, (m, k) in enumerate(zip(mib, kvs, strict=True))]  # fmt: skip

    steady = rss_check(samples(300, 900, 905, 910), warmup_s=10)  # warm-up growth left out
    assert steady.flat and steady.after_warmup_bytes == 900 * MIB and steady.max_bytes == 910 * MIB
    leak = rss_check(samples(300, 900, 950, 1000), warmup_s=10)
    assert not leak.flat and leak.growth_bytes == 100 * MIB and leak.tolerance_bytes == 45 * MIB
    kv = rss_check(samples(300, 900, 950, 1000, kv=(0, 0, 50, 100)), warmup_s=10)
    assert not kv.flat and kv.less_kv_flat and kv.less_kv_growth_bytes == 0
    assert not rss_check(samples(300, 900), warmup_s=10).enough  # one sample after warm-up


def test_vmrss_is_read_from_the_process_status() -> None:
    assert vmrss_bytes("Name:\tpython\nVmPeak:\t 9 kB\nVmRSS:\t  2048 kB\n") == 2 * MIB
    assert vmrss_bytes(Path("/proc/self/status").read_text()) > MIB
    with pytest.raises(ValueError, match="VmRSS"):
        vmrss_bytes("Name:\tzombie\n")


def test_slots_still_busy_are_named() -> None:
    idle = {"models": [{"model": "small", "leases": 0}],
            "queues": [{"model": "small", "waiting": 0, "running": 0}]}  # fmt: skip
    assert idle_problems(idle) == []
    busy = {"models": [{"model": "small", "leases": 1}],
            "queues": [{"model": "small", "waiting": 2, "running": 1}]}  # fmt: skip
    assert idle_problems(busy) == ["queue small: 2 waiting, 1 running", "model small: 1 leases"]


def test_the_kv_tally_follows_the_log_as_it_grows(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    saved = '{"type":"KVSaved","t":1,"tokens":3,"nbytes":100,"tier":"ram+disk"}\n'
    disk = '{"type":"KVSaved","t":1,"tokens":3,"nbytes":7,"tier":"disk"}\n'
    dropped = '{"type":"KVDropped","t":2,"tokens":3,"nbytes":40,"reason":"lru","tier":"ram"}\n'
    log.write_text(saved + disk + dropped[:30])  # a line still being written
    tally = KVTally(log)
    assert tally.update() == 100
    with log.open("a") as f:
        f.write(dropped[30:] + saved)
    assert tally.update() == 160


def test_a_short_soak_on_the_fake_backend_passes_every_check(tmp_path: Path) -> None:
    # Seed 0: client 0's first request reads to the end, client 1's disconnects, client 7's
    # cancels; every client sends at least one, so each result shows up however slow the host.
    argv = ["soak-slots", "--fake", "--clients", "8", "--slots", "4", "--minutes", "0.07",
            "--max-tokens", "16", "--disconnect", "0.3", "--cancel", "0.15", "--warmup", "1",
            "--sample-every", "0.5", "--name", "t", "--results", str(tmp_path)]  # fmt: skip
    assert cli.main(argv) == 0
    (out,) = tmp_path.iterdir()
    report = json.loads((out / "soak-slots.json").read_text())
    assert all(report["checks"].values()) and report["ok"], report["checks"]
    c = report["counts"]
    assert c["sent"] == c["completed"] + c["disconnected"] + c["cancelled"] + c["errors"]
    assert c["sent"] == len(report["outcomes"]) and c["errors"] == 0
    assert c["completed"] > 0 and c["disconnected"] > 0 and c["cancelled"] > 0
    assert report["log"]["tasks"] >= c["completed"] + c["disconnected"]
    assert report["replayed_tasks"] == report["log"]["tasks"]
    assert report["busy_after"] == [] and report["rss"]["enough"]
    assert report["rss"]["after_warmup_bytes"] > 0 and len(report["rss_samples"]) >= 4
    assert "| requests sent |" in (out / "soak-slots.md").read_text()
    assert (out / "events.jsonl").stat().st_size > 0
