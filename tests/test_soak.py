"""The soak benchmark: its flatness verdict (pure) and a short run on the fake backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swapos.bench.cli import main as bench_main
from swapos.bench.soak.stats import MIB, Sample, after_warmup, slope, trend, trends


def samples(rss_per_task: float, fds_every: int = 0) -> list[Sample]:
    return [
        Sample(
            tasks=n,
            t_s=float(n),
            rss_bytes=int(100 * MIB + rss_per_task * n),
            open_fds=10 + (n // fds_every if fds_every else 0),
            threads=4,
        )
        for n in range(0, 201, 10)
    ]


def test_slope_is_the_least_squares_line() -> None:
    assert slope([0, 1, 2, 3], [1, 3, 5, 7]) == pytest.approx(2.0)
    assert slope([5], [1]) == 0.0 and slope([2, 2], [1, 9]) == 0.0


def test_a_steady_process_is_flat_and_a_leak_is_not() -> None:
    steady = {t.metric: t for t in trends(samples(0.0), warmup_tasks=50)}
    assert all(t.flat and t.enough for t in steady.values())
    leak = {t.metric: t for t in trends(samples(64 * 1024), warmup_tasks=50)}
    assert not leak["rss_bytes"].flat  # 64 KiB a task: 9.4 MiB over 150 tasks > 8 MiB
    assert leak["rss_bytes"].growth == pytest.approx(64 * 1024 * 150, rel=1e-6)
    fds = {t.metric: t for t in trends(samples(0.0, fds_every=20), warmup_tasks=50)}
    assert not fds["open_fds"].flat  # one descriptor lost every 20 tasks
    assert fds["threads"].flat


def test_a_filling_kv_tier_is_told_apart_from_a_leak() -> None:
    """RSS that climbs with the KV RAM tier is the cache filling to its budget; RSS that climbs
    beside it is a leak."""
    filling = [
        Sample(tasks=n, t_s=n, rss_bytes=100 * MIB + n * MIB, open_fds=5, threads=2,
               kv_ram_bytes=n * MIB)
        for n in range(0, 101, 10)
    ]  # fmt: skip
    fit = {t.metric: t for t in trends(filling, warmup_tasks=20)}
    assert not fit["rss_bytes"].flat and fit["rss_less_kv_bytes"].flat
    leaking = [
        Sample(tasks=s.tasks, t_s=s.t_s, rss_bytes=s.rss_bytes, open_fds=5, threads=2)
        for s in filling
    ]
    assert not {t.metric: t for t in trends(leaking, 20)}["rss_less_kv_bytes"].flat


def test_warmup_growth_is_left_out_of_the_fit() -> None:
    warm = [Sample(tasks=0, t_s=0, rss_bytes=10 * MIB, open_fds=5, threads=1)]
    warm += [Sample(tasks=n, t_s=n, rss_bytes=500 * MIB, open_fds=9, threads=6) for n in (5, 10)]
    window = after_warmup(warm, warmup_tasks=5)
    assert [s.tasks for s in window] == [5, 10]
    assert all(t.flat and not t.enough for t in trends(warm, warmup_tasks=5))


def test_an_unknown_metric_is_refused() -> None:
    with pytest.raises(ValueError, match="no tolerance"):
        trend("t_s", samples(0.0))


def test_soak_on_the_fake_backend_reports_flat_figures_as_json(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    code = bench_main(
        ["soak", "--fake-tasks", "6", "--real-tasks", "0", "--every", "2", "--warmup", "0.3",
         "--out", str(out), "--dir", str(tmp_path)]
    )  # fmt: skip
    report = json.loads(out.read_text())
    (part,) = report["parts"]
    assert part["kind"] == "fake" and part["tasks"] == 6 and part["errors"] == 0
    assert [s["tasks"] for s in part["samples"]] == [0, 2, 4, 6]
    assert part["warmup_tasks"] == 2
    assert {t["metric"] for t in part["trends"]} == {
        "rss_bytes",
        "rss_less_kv_bytes",
        "open_fds",
        "threads",
    }
    assert all(s["kv_ram_bytes"] >= 0 for s in part["samples"])
    assert all(s["open_fds"] > 0 and s["threads"] > 0 for s in part["samples"])
    assert code == (0 if all(t["flat"] for t in part["trends"]) else 1)


def test_without_sample_trim_the_samples_carry_raw_rss_only(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    bench_main(
        ["soak", "--fake-tasks", "2", "--real-tasks", "0", "--every", "1", "--no-sample-trim",
         "--out", str(out), "--dir", str(tmp_path)]
    )  # fmt: skip
    (part,) = json.loads(out.read_text())["parts"]
    assert [s["rss_trimmed_bytes"] for s in part["samples"]] == [0, 0, 0]
    assert all(s["rss_bytes"] > 0 for s in part["samples"])


def test_soak_refuses_a_warmup_that_leaves_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["soak", "--warmup", "1", "--real-tasks", "0"]) == 2
    assert "--warmup" in capsys.readouterr().err
