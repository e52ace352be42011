"""The suite benchmark on fake models: interleaving, results per task, resume, report."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import msgspec
import pytest

from swapos.actors.system import System
from swapos.backends.fake_script import FakeModelScript
from swapos.bench import report
from swapos.bench.cli import build_parser
from swapos.bench.cli import main as bench_main
from swapos.bench.results import info_of, read_summary, summarize
from swapos.bench.suite import command as suite_command
from swapos.bench.suite.arms import arm_profile
from swapos.bench.suite.command import parse_choices, write_comparison
from swapos.bench.suite.session import run_bench
from swapos.bench.swap.coldcache import ColdCache
from swapos.capsule.schema import decode_capsule
from swapos.data.task import Task, TaskMeta
from swapos.errors import EventLogError, SwapOSError
from swapos.models.profile import MODES as ALL_MODES
from swapos.models.profile import Mode, Profile
from swapos.records.schema import RunSummary, TaskResult
from swapos.testing import FakeClock
from tests.fakes import fake_system
from tests.fakes import pipeline_profile as profile

pytestmark = pytest.mark.anyio

MODES: list[str] = list(ALL_MODES)
ARMS = ["pipeline", "single"]
GOOD = "def add(a, b):\n    return a + b\n```"


def task(i: int) -> Task:
    return Task(
        meta=TaskMeta(task_id=f"add{i}", category="bugfix", difficulty=3, description="fix"),
        root="",
        problem="`add(a, b)` should return the sum of a and b.",
        starter="def add(a, b):\n    return a - b\n",
        tests={
            "test_add.py": "from solution import add\n\n\ndef test_add():\n"
            "    assert add(2, 3) == 5\n"
        },
    )


TASKS = [task(i) for i in range(3)]


def make_factory(clock: FakeClock, opened: list[tuple[str, str]]):  # type: ignore[no-untyped-def]
    scripts = {
        "planner": FakeModelScript(load_s=1.0, token_s=0.01, reply="Return a plus b.\n\n"),
        "coder": FakeModelScript(load_s=1.0, token_s=0.01, reply=GOOD),
        "critic": FakeModelScript(load_s=1.0, token_s=0.01, reply="fine\n\n"),
    }

    @asynccontextmanager
    async def factory(prof: Profile, mode: Mode, events: Path) -> AsyncIterator[System]:
        opened.append((mode, str(events)))
        async with fake_system(
            scripts, budget=250, clock=clock, profile=prof, mode=mode, event_log=events
        ) as (system, _):
            yield system

    return factory


async def bench(
    out: Path,
    tasks: list[Task] = TASKS,
    *,
    resume: bool = False,
    modes: list[str] = MODES,
    cold: ColdCache | None = None,
) -> tuple[dict[tuple[str, str], RunSummary], list[tuple[str, str]]]:
    clock, opened = FakeClock(), []
    with anyio.fail_after(300):  # a deadlock guard: 24 real sandboxed grades take ~60 s under load
        async with clock.autojump():
            summaries = await run_bench(
                tasks,
                profile(),
                out=out,
                modes=modes,
                arms=ARMS,
                resume=resume,
                factory=make_factory(clock, opened),
                clock=clock,
                cold=cold,
            )
    return summaries, opened


def stored(out: Path, key: str) -> RunSummary:
    summary = read_summary(out / key / "results.json")
    assert summary is not None
    return summary


async def test_every_mode_and_arm_runs_every_task_then_compares_and_reports(
    tmp_path: Path,
) -> None:
    summaries, opened = await bench(tmp_path)
    assert len(summaries) == 8 and len(opened) == 8
    for (mode, arm), summary in summaries.items():
        assert summary.mode == mode and summary.tasks_total == 3 and summary.pass_rate == 1.0
        assert stored(tmp_path, f"{mode}-{arm}") == summary
        assert (tmp_path / f"{mode}-{arm}" / "events.jsonl").stat().st_size > 0
        assert summary.wall_clock_s >= sum(r.wall_clock_s for r in summary.results)
        assert summarize(summary.results, info_of(summary)) == summary
        # Each task's final capsule is kept beside the results: the candidates' code.
        capsules = {p.stem: p for p in (tmp_path / f"{mode}-{arm}" / "capsules").glob("*.json")}
        assert sorted(capsules) == sorted(r.task_id for r in summary.results)
        for r in summary.results:
            capsule = decode_capsule(capsules[r.task_id].read_bytes())
            assert capsule.meta.task_id == r.task_id and capsule.artifacts
        phases = [[p.phase for p in r.phases] for r in summary.results]
        if arm == "single":
            assert phases == [["code", "grade"]] * 3
        else:
            assert all(names[:2] == ["reason", "code"] for names in phases)
    assert summaries[("resident", "pipeline")].total_load_s == 0.0
    assert summaries[("overlap", "pipeline")].total_load_hidden_s > 0.0

    data = json.loads(write_comparison(tmp_path, summaries).read_text())
    assert set(data) >= {
        "arms",
        "wall_ratios",
        "hidden_load_fraction",
        "mcnemar_arms",
        "mcnemar_modes",
        "bootstrap",
    }
    assert list(data["arms"])[:2] == ["overlap-pipeline", "overlap-single"]
    assert list(data["arms"])[2:4] == ["lru-pipeline", "lru-single"]
    assert next(iter(data["wall_ratios"]["pipeline"])) == "overlap/lru"
    assert set(data["wall_ratios"]["pipeline"]) == {
        "overlap/lru",
        "overlap/resident",
        "lru/resident",
        "sequential/resident",
        "overlap/sequential",
    }
    assert [m["p_value"] for m in data["mcnemar_arms"]] == [1.0] * 4
    assert bench_main(["report", str(tmp_path)]) == 0
    text = (tmp_path / "report.md").read_text()
    for heading in ("Modes and arms", "Wall-time ratios", "McNemar", "Per phase", "Timeline"):
        assert heading in text
    assert "overlap-single" in text
    assert json.loads((tmp_path / "trace-overlap-pipeline.json").read_text())


def test_single_arm_profile_allows_one_attempt_and_never_plans() -> None:
    single = arm_profile(profile(), "single")
    assert single.pipeline.max_attempts == 1
    assert single.pipeline.skip_reason_max_difficulty >= 10**6
    assert arm_profile(profile(), "pipeline") == profile()


async def test_resume_skips_finished_tasks_and_never_double_counts(tmp_path: Path) -> None:
    modes = ["overlap", "resident"]
    first, _ = await bench(tmp_path, TASKS[:2], modes=modes)
    assert all(s.tasks_total == 2 for s in first.values())
    with pytest.raises(SwapOSError, match="--resume"):  # raised before anything runs
        await run_bench(TASKS, profile(), out=tmp_path, modes=MODES, arms=ARMS)
    summaries, opened = await bench(tmp_path, resume=True, modes=modes)
    for key, summary in summaries.items():
        ids = [r.task_id for r in summary.results]
        assert ids == ["add0", "add1", "add2"]
        assert summary.tasks_passed == 3
        assert summary.loads >= first[key].loads
        assert summary.run_at == first[key].run_at
    assert all(events.endswith("events-2.jsonl") for _, events in opened)
    # Nothing left: a further resume opens no system and changes nothing.
    again, opened = await bench(tmp_path, resume=True, modes=modes)
    assert opened == [] and again == summaries


async def test_corrupt_results_on_resume_says_what_to_do(tmp_path: Path) -> None:
    await bench(tmp_path, TASKS[:1], modes=["overlap"])
    (tmp_path / "overlap-single" / "results.json").write_text('{"tasks_total": ')
    with pytest.raises(EventLogError, match="delete it"):  # raised before anything runs
        await run_bench(TASKS, profile(), out=tmp_path, modes=["overlap"], arms=ARMS, resume=True)


async def test_cold_cache_is_skipped_with_a_reason_when_not_writable(tmp_path: Path) -> None:
    notes: list[str] = []
    cold = ColdCache(notes.append, path=tmp_path / "missing" / "drop_caches")
    await bench(tmp_path / "out", TASKS[:1], modes=["overlap"], cold=cold)
    assert cold.applied == 0 and cold.skipped_reason and len(notes) == 1
    target = tmp_path / "drop_caches"
    target.write_text("")
    cold = ColdCache(notes.append, path=target)
    await bench(tmp_path / "out2", TASKS[:1], modes=["overlap"], cold=cold)
    assert cold.applied == 2 and target.read_text() == "1\n"


async def test_summarize_agrees_with_the_live_aggregator(tmp_path: Path) -> None:
    clock, opened = FakeClock(), []
    with anyio.fail_after(300):  # a deadlock guard: 24 real sandboxed grades take ~60 s under load
        async with (
            clock.autojump(),
            make_factory(clock, opened)(profile(), "overlap", tmp_path / "live.jsonl") as system,
        ):
            for t in TASKS:
                await system.run_task(t)
            live = system.summary()
    assert summarize(live.results, info_of(live)) == live
    assert live.phases_total > 0 and live.load_hidden_fraction > 0


def test_unknown_mode_or_arm_lists_the_valid_ones() -> None:
    with pytest.raises(SwapOSError, match="overlap, sequential, resident"):
        parse_choices("overlap,turbo", ["overlap", "sequential", "resident"], "mode")
    assert bench_main(["run", "--modes", "turbo"]) == 2
    assert bench_main(["run", "--arms", "pipeline,duo"]) == 2


def test_ray_runs_only_when_the_cluster_is_plugged_in() -> None:
    # The suite does not import the cluster (no import cycle): bench's command line plugs
    # swapos.cluster.session.run_on_ray in; called without it, --ray is refused up front.
    args = build_parser().parse_args(["run", "--ray", "--suite", "builtin"])
    with pytest.raises(SwapOSError, match="--ray is not available"):
        suite_command.main(args)


def test_empty_suite_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["run", "--suite", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "has no tasks" in capsys.readouterr().err


def test_report_without_results_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench_main(["report", str(tmp_path)]) == 2
    assert "bench run" in capsys.readouterr().err


def test_results_files_round_trip(tmp_path: Path) -> None:
    summary = summarize([TaskResult(task_id="t", passed=True)], info_of(RunSummary(mode="x")))
    (tmp_path / "r.json").write_bytes(msgspec.json.encode(summary))
    assert read_summary(tmp_path / "r.json") == summary
    assert report.load_results is not None


class Announcing:
    """A System stand-in that records which next task every run announces."""

    def __init__(self, system: System, calls: list[tuple[str, str, str | None]], mode: str):
        self._system, self._calls, self._mode = system, calls, mode

    async def run_task(self, task: Task, **kwargs: object) -> object:
        nxt = kwargs.get("next_task")
        self._calls.append(
            (self._mode, task.task_id, nxt.task_id if isinstance(nxt, Task) else None)
        )
        return await self._system.run_task(task, **kwargs)  # type: ignore[arg-type]

    def summary(self) -> RunSummary:
        return self._system.summary()


async def test_every_task_run_announces_the_next_task_of_its_system(tmp_path: Path) -> None:
    clock, opened = FakeClock(), []
    calls: list[tuple[str, str, str | None]] = []
    inner = make_factory(clock, opened)

    @asynccontextmanager
    async def factory(prof: Profile, mode: Mode, events: Path) -> AsyncIterator[System]:
        async with inner(prof, mode, events) as system:
            yield Announcing(system, calls, mode)  # type: ignore[misc]

    modes = ["overlap", "lru"]
    with anyio.fail_after(300):  # a deadlock guard: 24 real sandboxed grades take ~60 s under load
        async with clock.autojump():
            await run_bench(
                TASKS[:2], profile(), out=tmp_path, modes=modes, arms=["pipeline"],
                factory=factory, clock=clock,
            )  # fmt: skip
            first = list(calls)
            calls.clear()  # resumed: add0 and add1 are done, add2 is the last to run
            await run_bench(
                TASKS, profile(), out=tmp_path, modes=modes, arms=["pipeline"],
                factory=factory, clock=clock, resume=True,
            )  # fmt: skip
    # Task 1 runs in the rotated order (lru first); each system names its own next task.
    assert first == [
        ("overlap", "add0", "add1"),
        ("lru", "add0", "add1"),
        ("lru", "add1", None),
        ("overlap", "add1", None),
    ]
    assert calls == [("overlap", "add2", None), ("lru", "add2", None)]


def test_the_peak_rss_of_a_run_of_several_systems_is_set_against_their_budgets() -> None:
    from swapos.bench.suite.command import _peak
    from swapos.records.schema import RunSummary

    s = RunSummary(peak_rss_bytes=2871 << 20, budget_bytes=1536 << 20, overhead_bytes=63 << 20)
    assert "of 1536 MiB budget (1.869x; fixed overhead 63 MiB)" in _peak(s)
    two = _peak(s, 2)
    assert "of 3072 MiB budget (0.935x;" in two and "2 systems of 1536 MiB in this process" in two
    assert "fixed overhead (" in two and "MiB) no budget holds" in two
