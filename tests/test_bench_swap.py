"""The swap microbench runs end to end (fake backend, tiny sizes; timings are its job)."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest

from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.bench import cli
from swapos.bench.swap.command import build_args, run_bench
from swapos.bench.swap.measure import CacheDropper, Rig, measure_swap, run_mode
from swapos.bench.swap.report import SwapReport
from swapos.bench.swap.results import ModeRun
from swapos.bench.swap.stats import ModeStats, Ratio, median, targets, wall_ratios
from swapos.bench.swap.workload import (
    alternating,
    pipeline_phases,
    rotation,
    round_order,
    schedule_models,
)
from swapos.clock import MonotonicClock
from swapos.models.profile import ModelConfig, Profile
from swapos.models.spec import ModelSpec

pytestmark = pytest.mark.anyio

NAMES = ("a", "b", "c")
SCRIPT = FakeModelScript(load_s=0.02, token_s=0.001, reply="x y z w", footprint_bytes=100)


class NoDropBackend(FakeBackend):
    async def drop_page_cache(self, spec: ModelSpec) -> bool:
        return False


def fake_rig(tmp_path: Path, *, drop_caches: Path | None = None) -> Rig:
    """Three fake models, a budget that holds two of them, a writable ``drop_caches``."""
    (tmp_path / "drop_caches").touch()
    specs = {n: ModelSpec(name=n, path=f"/nonexistent/{n}.gguf") for n in NAMES}
    profile = Profile(
        name="fake", budget=250, models={n: ModelConfig(path=s.path) for n, s in specs.items()}
    )
    return Rig(
        profile=profile,
        specs=specs,
        new_backend=lambda: FakeBackend(MonotonicClock(), dict.fromkeys(NAMES, SCRIPT)),
        drop_caches=drop_caches or tmp_path / "drop_caches",
    )


def test_pipeline_alternates_after_the_first_model() -> None:
    assert alternating(list(NAMES), 7) == ["a", "b", "c", "b", "c", "b", "c"]
    assert alternating(list(NAMES), 0) == []
    phases = pipeline_phases(alternating(list(NAMES), 4), tokens=5)
    assert [p.model for p in phases] == ["a", "b", "c", "b"]
    assert {p.params.max_tokens for p in phases} == {5}
    assert len({p.prompt for p in phases}) == 1


def test_the_rotation_follows_the_profiles_roles_with_one_retry_per_task() -> None:
    roles = {"reason": "a", "code": "b", "critic": "c"}
    assert rotation(roles, list(NAMES), 11) == list("abcbcabcbca")  # fix: the coder
    default = {"reason": "large", "code": "small", "critic": "large", "fix": "large"}
    assert rotation(default, ["large", "small"], 6) == [
        *("large", "small", "large", "large", "large"),
        "large",
    ]
    assert rotation({}, list(NAMES), 6) == list("abcbca")  # no roles: first, second, third
    assert rotation({}, ["m"], 3) == ["m", "m", "m"]
    assert schedule_models("rotation", list(NAMES), roles, 5) == list("abcbc")
    assert schedule_models("alternating", list(NAMES), roles, 4) == list("abcb")
    with pytest.raises(ValueError, match="unknown schedule"):
        schedule_models("zigzag", list(NAMES), roles, 4)


def test_schedule_and_budget_flags_are_parsed_and_checked() -> None:
    args = build_args(["--schedule", "rotation", "--budget", "600MiB"])
    assert (args.schedule, args.budget) == ("rotation", "600MiB")
    with pytest.raises(SystemExit):
        build_args(["--budget", "lots"])
    with pytest.raises(SystemExit):
        build_args(["--schedule", "zigzag"])


async def test_dropper_uses_drop_caches_then_per_file_then_gives_up(tmp_path: Path) -> None:
    specs = fake_rig(tmp_path).specs
    drop_caches = tmp_path / "drop_caches"
    drop_caches.touch()
    backend = FakeBackend(MonotonicClock(), dict.fromkeys(NAMES, SCRIPT))
    with anyio.fail_after(10):
        first = CacheDropper(backend, specs, drop_caches)
        assert await first.drop() and first.method == "drop_caches"
        assert drop_caches.read_text() == "1\n"
        second = CacheDropper(backend, specs, tmp_path / "missing")
        backend.warmed.add("a")
        assert await second.drop() and second.method == "fadvise"
        assert "a" not in backend.warmed
        nodrop = NoDropBackend(MonotonicClock(), dict.fromkeys(NAMES, SCRIPT))
        third = CacheDropper(nodrop, specs, tmp_path / "missing")
        assert not await third.drop() and not await third.drop()
    assert third.method is None and third.unavailable is not None
    assert "does not exist" in third.unavailable and "posix_fadvise" in third.unavailable


@pytest.mark.parametrize("condition", ["warm", "cold"])
async def test_swap_sample_times_load_first_token_and_close(condition: str, tmp_path: Path) -> None:
    rig = fake_rig(tmp_path)
    backend = FakeBackend(MonotonicClock(), dict.fromkeys(NAMES, SCRIPT))
    dropper = CacheDropper(backend, rig.specs, rig.drop_caches)
    with anyio.fail_after(10):
        sample = await measure_swap(backend, rig.specs["a"], condition=condition, dropper=dropper)
    assert sample is not None and sample.model == "a" and sample.condition == condition
    assert sample.load_s >= SCRIPT.load_s
    assert sample.swap_s >= sample.load_s + sample.ttft_s
    assert sample.prompt_tokens == 200
    assert not backend.open_models  # closed again
    assert dropper.drops == (condition == "cold")


async def test_cold_swap_is_skipped_when_the_cache_cannot_be_dropped(tmp_path: Path) -> None:
    rig = fake_rig(tmp_path)
    backend = NoDropBackend(MonotonicClock(), dict.fromkeys(NAMES, SCRIPT))
    dropper = CacheDropper(backend, rig.specs, tmp_path / "missing")
    with anyio.fail_after(10):
        assert (
            await measure_swap(backend, rig.specs["a"], condition="cold", dropper=dropper) is None
        )
    assert not backend.loads


@pytest.mark.parametrize(
    ("mode", "loads", "evictions"),
    [("sequential", 5, 4), ("lru", 3, 1), ("overlap", 3, 1), ("resident", 3, 0)],
)
async def test_mode_run_counts_what_each_mode_loads(
    mode: str, loads: int, evictions: int, tmp_path: Path
) -> None:
    rig = fake_rig(tmp_path)
    phases = pipeline_phases(alternating(list(NAMES), 5), tokens=2)
    with anyio.fail_after(20):
        run = await run_mode(rig, mode, phases, condition="cold")  # type: ignore[arg-type]
    assert run.error is None
    assert (run.loads, run.evictions, run.tokens) == (loads, evictions, 10)
    assert run.wall_s > 0
    assert [r.model for r in run.records] == ["a", "b", "c", "b", "c"]
    if mode == "sequential":
        assert run.load_s >= 5 * SCRIPT.load_s and run.load_hidden_fraction == 0.0
    if mode == "lru":  # on demand, never prefetched: a, b, c paid; b and c kept
        assert run.load_s >= 3 * SCRIPT.load_s and run.load_hidden_fraction == 0.0
    if mode == "resident":  # preloaded before the clock started: nothing paid in run_phases
        assert run.load_s < 0.01 and run.open_s >= 3 * SCRIPT.load_s


def _mode(cond: str, mode: str, *, hidden: float = 1.0, peak: int = 0) -> ModeStats:
    return ModeStats(
        condition=cond, mode=mode, runs=1, wall_s=1.0, open_s=0.0, load_s=0.1,
        load_hidden_s=0.9, evict_s=0.0, load_hidden_fraction=hidden,
        swap_hidden_fraction=1.0, loads=3, evictions=1, tokens=9,
        peak_rss_delta_bytes=peak, peak_rss_delta_max_bytes=peak, errors=[],
    )  # fmt: skip


def test_targets_compare_against_the_issue_thresholds() -> None:
    ratios = [
        Ratio(condition="cold", name="overlap/sequential", per_round=[0.8, 0.9], median=0.85),
        Ratio(condition="warm", name="overlap/sequential", per_round=[1.03], median=1.03),
    ]
    modes = [
        _mode("cold", "overlap", hidden=0.85, peak=1049),
        _mode("cold", "sequential", peak=1051),
        _mode("cold", "resident", peak=10**6),
    ]
    checks = {
        (c.condition, c.name): c.met for c in targets(modes, ratios, budget=1000, holds_two=True)
    }
    assert checks == {
        ("cold", "overlap wall / sequential wall <="): True,
        ("warm", "overlap wall / sequential wall <="): False,
        ("cold", "hidden-load fraction >="): False,
        ("cold", "hidden-load fraction, swaps only (phase 2..n) >="): True,
        ("cold", "overlap peak RSS - baseline (MiB) <="): True,
        ("cold", "sequential peak RSS - baseline (MiB) <="): False,
    }
    no_two = targets(modes, ratios, budget=1000, holds_two=False)
    assert not any("hidden" in c.name for c in no_two)


def test_targets_against_lru_follow_the_schedule_and_the_budget() -> None:
    ratios = [
        Ratio(condition="cold", name="overlap/lru", per_round=[0.8, 0.88], median=0.84),
        Ratio(condition="warm", name="overlap/lru", per_round=[0.97], median=0.97),
        Ratio(condition="cold", name="overlap/resident", per_round=[1.1], median=1.1),
    ]
    modes = [_mode("cold", "overlap"), _mode("cold", "resident")]

    def checks(*, holds_two: bool, schedule: str) -> dict[tuple[str, str], bool]:
        found = targets(modes, ratios, budget=1000, holds_two=holds_two, schedule=schedule)
        return {
            (c.condition, c.name): c.met for c in found if "lru" in c.name or "resident" in c.name
        }

    assert checks(holds_two=True, schedule="rotation") == {
        ("cold", "overlap wall / lru wall <="): True,
        ("cold", "overlap wall / resident wall <="): False,
    }
    assert checks(holds_two=True, schedule="alternating") == {}
    assert checks(holds_two=False, schedule="alternating") == {
        ("cold", "overlap wall / lru wall <="): True,
        ("warm", "overlap wall / lru wall <="): False,
    }


def test_round_order_rotates_so_each_mode_goes_first_in_turn() -> None:
    modes = ["overlap", "lru", "sequential"]
    assert [round_order(modes, k)[0] for k in range(4)] == [
        "overlap",
        "lru",
        "sequential",
        "overlap",
    ]
    assert round_order(modes, 1) == ["lru", "sequential", "overlap"]
    assert modes == ["overlap", "lru", "sequential"]  # not rotated in place


def _run(rnd: int, cond: str, mode: str, wall: float, error: str | None = None) -> ModeRun:
    return ModeRun(
        round=rnd, condition=cond, mode=mode, position=0, wall_s=wall, open_s=0.0, load_s=0.0,
        load_hidden_s=0.0, evict_s=0.0, load_hidden_fraction=0.0, swap_hidden_fraction=0.0,
        loads=0, evictions=0, tokens=0, baseline_rss_bytes=0, open_rss_bytes=0,
        peak_rss_bytes=0, peak_rss_delta_bytes=0, load_avg=0.0, records=[], error=error,
    )  # fmt: skip


def test_wall_ratios_pair_rounds_and_skip_failed_runs() -> None:
    runs = [
        _run(0, "cold", "overlap", 8.0), _run(0, "cold", "sequential", 10.0),
        _run(1, "cold", "overlap", 9.0), _run(1, "cold", "sequential", 10.0),
        _run(2, "cold", "overlap", 1.0), _run(2, "cold", "sequential", 10.0, error="boom"),
        _run(0, "warm", "overlap", 5.0),  # no sequential run to divide by
    ]  # fmt: skip
    ratios = wall_ratios(runs, ["cold", "warm"])
    assert [(r.condition, r.name, r.per_round) for r in ratios] == [
        ("cold", "overlap/sequential", [0.8, 0.9])
    ]
    assert ratios[0].median == pytest.approx(0.85)


def test_median_of_nothing_is_zero() -> None:
    assert median([]) == 0.0
    assert median([3.0, 1.0, 2.0]) == 2.0


async def test_bench_interleaves_modes_and_reports_ratios(tmp_path: Path) -> None:
    rig = fake_rig(tmp_path)
    args = build_args(["--repeats", "1", "--rounds", "2", "--phases", "3", "--tokens", "2"])
    with anyio.fail_after(60):
        report = await run_bench(rig, args, say=lambda _: None)
    assert report.cold_method == "drop_caches" and report.cold_skipped is None
    assert [(s.model, s.condition) for s in report.models] == [
        (n, c) for c in ("cold", "warm") for n in NAMES
    ]
    # Each round runs every mode once per condition, rotating which mode goes first.
    firsts = [r.mode for r in report.runs if r.position == 0]
    assert firsts == ["overlap", "overlap", "lru", "lru"]
    assert len(report.runs) == 2 * 2 * 4
    names = {(r.condition, r.name): len(r.per_round) for r in report.ratios}
    assert names[("cold", "overlap/resident")] == 2 and len(names) == 2 * 5
    assert report.ratios[0].name == "overlap/lru"
    assert report.budget_holds_two and report.phases == ["a", "b", "c"]
    decoded = msgspec.json.decode(msgspec.json.encode(report), type=SwapReport)
    assert decoded == report


async def test_rotation_under_a_budget_for_one_model(tmp_path: Path) -> None:
    """With room for one model every phase change is a load in every budgeted mode; prefetch
    cannot load ahead (it can only warm files), and overlap must not load more than lru."""
    rig = fake_rig(tmp_path)
    args = build_args(
        ["--repeats", "1", "--rounds", "1", "--phases", "6", "--tokens", "2",
         "--schedule", "rotation", "--budget", "100", "--conditions", "warm"]
    )  # fmt: skip
    with anyio.fail_after(60):
        report = await run_bench(rig, args, say=lambda _: None)
    assert report.schedule == "rotation" and report.phases == list("abcbca")
    assert report.budget_bytes == 100 and not report.budget_holds_two
    loads = {r.mode: r.loads for r in report.runs}
    assert loads["lru"] == 6 and loads["sequential"] == 6
    assert loads["overlap"] <= loads["lru"]
    assert "--schedule rotation --budget 100" in report.command


async def test_bench_skips_cold_with_a_reason(tmp_path: Path) -> None:
    specs = fake_rig(tmp_path).specs
    rig = Rig(
        profile=fake_rig(tmp_path).profile,
        specs=specs,
        new_backend=lambda: NoDropBackend(MonotonicClock(), dict.fromkeys(NAMES, SCRIPT)),
        drop_caches=tmp_path / "missing",
    )
    args = build_args(["--repeats", "1", "--rounds", "1", "--phases", "2", "--modes", "overlap"])
    said: list[str] = []
    with anyio.fail_after(30):
        report = await run_bench(rig, args, say=said.append)
    assert report.cold_skipped is not None
    assert any(s.startswith("cold skipped:") for s in said)
    assert {r.condition for r in report.runs} == {"warm"}


def test_cli_rejects_an_unknown_mode() -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["swap", "--modes", "overlap,fast"])


@pytest.mark.real_model
@pytest.mark.slow
def test_cli_runs_on_the_real_models(tmp_path: Path) -> None:
    out = tmp_path / "swap.json"
    argv = ["swap", "--repeats", "1", "--rounds", "1", "--phases", "3", "--tokens", "4",
            "--conditions", "warm", "--modes", "overlap,sequential", "--out", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    report = msgspec.json.decode(out.read_bytes(), type=SwapReport)
    assert [s.model for s in report.models] == ["planner", "coder", "critic"]
    assert all(s.load_s > 0 and s.rss_delta_bytes > 0 for s in report.models)
    assert {(r.mode, r.error) for r in report.runs} == {("overlap", None), ("sequential", None)}
    assert [r.name for r in report.ratios] == ["overlap/sequential"]
