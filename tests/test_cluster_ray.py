"""The suite benchmark on a local Ray (2 CPUs, no dashboard) with the fake backend.

One Ray session serves the whole module. Skipped where ``ray`` is not installed
(``pip install 'swapos[ray]'``; the ``test`` extra includes it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from swapos.bench.cli import main as bench_main
from swapos.bench.compare import Key
from swapos.bench.replay import load_events
from swapos.bench.results import read_summary
from swapos.bench.suite.session import run_bench
from swapos.capsule.schema import decode_capsule
from swapos.cluster.driver import ClusterReport
from swapos.cluster.session import run_on_ray
from swapos.data.task import Task, TaskMeta
from swapos.messages.events import RunStarted
from swapos.models.bundled import default_profile
from swapos.records.schema import RunSummary, TaskResult
from tests import cluster_fakes
from tests.cluster_fakes import RAY_OPTIONS, FakeFactory, task
from tests.fakes import pipeline_profile as profile

ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'swapos[ray]'")

pytestmark = pytest.mark.anyio

TASKS = [task(i) for i in range(10)]
PIPELINE: Key = ("overlap", "pipeline")
KEYS: list[Key] = [PIPELINE, ("overlap", "single")]
SHORT = TASKS[:4]
RESUMED = TASKS[:6]


@pytest.fixture(scope="module")
def ray_session() -> Iterator[str]:
    """A local Ray for this module; yields its address (for a driver in a subprocess)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, **RAY_OPTIONS)
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


class Counting:
    """A reporter that remembers every triple it is told about."""

    def __init__(self) -> None:
        self.triples: list[tuple[str, Key]] = []

    def start(self, total: int, keys: Sequence[Key]) -> None:
        self.total = total

    def advance(self, key: Key, result: TaskResult) -> None:
        self.triples.append((result.task_id, key))


async def on_ray(
    out: Path,
    factory: FakeFactory,
    tasks: list[Task],
    keys: list[Key],
    *,
    resume: bool = False,
    reporter: Counting | None = None,
) -> tuple[dict[Key, RunSummary], ClusterReport]:
    with anyio.fail_after(90):
        return await run_on_ray(
            tasks, profile(), address=None, workers=2, out=out, modes=["overlap"],
            arms=[arm for _, arm in keys], resume=resume, reporter=reporter, factory=factory,
            options=RAY_OPTIONS,
        )  # fmt: skip


def outcome(r: TaskResult) -> tuple[Any, ...]:
    """A task's result without its timings."""
    return (
        r.task_id, r.passed, r.pass_at_1, r.iterations, r.tests_passed, r.tests_total,
        r.error, [(p.phase, p.model, p.outcome, p.tokens) for p in r.phases],
    )  # fmt: skip


@pytest.fixture(scope="module")
def local_results(tmp_path_factory: pytest.TempPathFactory) -> dict[Key, RunSummary]:
    """The suite run locally, once (its results do not depend on the event loop)."""

    async def run() -> dict[Key, RunSummary]:
        with anyio.fail_after(90):
            return await run_bench(
                TASKS, profile(), out=tmp_path_factory.mktemp("local"), modes=["overlap"],
                arms=["pipeline"], factory=FakeFactory(),
            )  # fmt: skip

    return anyio.run(run)


async def test_two_workers_share_the_suite_and_match_a_local_run(
    ray_session: str, local_results: dict[Key, RunSummary], tmp_path: Path
) -> None:
    summaries, report = await on_ray(tmp_path / "ray", FakeFactory(), TASKS, [PIPELINE])
    local = local_results
    for key in [PIPELINE]:
        ours = [outcome(r) for r in summaries[key].results]
        assert ours == [outcome(r) for r in local[key].results]
        assert [r.task_id for r in summaries[key].results] == [t.task_id for t in TASKS]
        assert (
            read_summary(tmp_path / "ray" / f"{key[0]}-{key[1]}" / "results.json")
            == (summaries[key])
        )
    assert summaries[PIPELINE].tasks_passed == 7  # add2, add5, add8 fail
    capsules = sorted((tmp_path / "ray" / "overlap-pipeline" / "capsules").glob("*.json"))
    assert [p.stem for p in capsules] == sorted(t.task_id for t in TASKS)  # sent back too
    assert all(decode_capsule(p.read_bytes()).artifacts for p in capsules)
    assert sorted(w.state for w in report.workers) == ["closed", "closed"]
    assert sum(w.tasks for w in report.workers) == 10 and report.reruns == 0
    assert all(w.tasks >= 1 for w in report.workers), "one queue feeds both workers"
    assert len(report.overhead_s) == 10
    # Every worker's log came back, its header naming its node; together they hold every task.
    logs = sorted((tmp_path / "ray" / "overlap-pipeline").glob("events-*.jsonl"))
    assert [p.name for p in logs] == ["events-w0.jsonl", "events-w1.jsonl"]
    headers = [load_events(p)[0][0] for p in logs]
    assert all(isinstance(h, RunStarted) for h in headers)
    assert sorted(h.host["node"].split("@")[0] for h in headers if isinstance(h, RunStarted)) == [
        "w0", "w1"
    ]  # fmt: skip
    # The set replays as one run (every task once) and traces each node as its own process.
    trace_path, replayed = tmp_path / "trace.json", tmp_path / "replayed.json"
    argv = ["replay", *map(str, logs), "--trace", str(trace_path), "--json", str(replayed)]
    assert bench_main(argv) == 0
    merged = msgspec.json.decode(replayed.read_bytes(), type=RunSummary)
    assert sorted(outcome(r) for r in merged.results) == [
        outcome(r) for r in local[PIPELINE].results
    ]
    names = [e["args"]["name"] for e in json.loads(trace_path.read_text())["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"]  # fmt: skip
    assert sorted(n.split("@")[0] for n in names) == ["w0", "w1"]
    assert bench_main(["report", str(tmp_path / "ray")]) == 0
    assert "2 event logs: w0@" in (tmp_path / "ray" / "report.md").read_text()


async def test_a_killed_workers_task_runs_once_more_elsewhere_and_counts_once(
    ray_session: str, tmp_path: Path
) -> None:
    marker = tmp_path / "killed"
    # add2 runs overlap-pipeline, then overlap-single (the order rotates by task index):
    # its worker dies in the second.
    factory = FakeFactory(kill_task="add2", kill_key=KEYS[1], marker=str(marker))
    reporter = Counting()
    summaries, report = await on_ray(tmp_path / "out", factory, SHORT, KEYS, reporter=reporter)
    assert marker.exists()
    killed = marker.read_text().split("@")[0]
    states = {w.name: w.state for w in report.workers}
    assert states[killed] == "lost" and list(states.values()).count("closed") == 1
    assert report.reruns == 1 and report.given_up == []
    for key in KEYS:
        ids = [r.task_id for r in summaries[key].results]
        assert ids == [t.task_id for t in SHORT]  # every task once, add2 included
    # add2's first mode/arm finished before the kill and was not run again.
    assert sorted(reporter.triples) == sorted({(t.task_id, k) for t in SHORT for k in KEYS})


async def test_a_worker_that_cannot_open_the_profile_is_reported_and_drained(
    ray_session: str, tmp_path: Path
) -> None:
    summaries, report = await on_ray(
        tmp_path / "out", FakeFactory(fail_node="w1@"), SHORT, [PIPELINE]
    )
    states = {w.name: (w.state, w.tasks) for w in report.workers}
    assert states == {"w0": ("closed", 4), "w1": ("failed", 0)}
    assert "missing" in next(w.reason for w in report.workers if w.name == "w1")
    assert summaries[PIPELINE].tasks_total == 4


async def test_resume_after_the_driver_is_killed_never_repeats_a_finished_triple(
    ray_session: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    errors = tmp_path / "driver.err"
    argv = ["-m", "tests.cluster_driver", ray_session, str(out), str(len(RESUMED))]
    with errors.open("wb") as err:
        driver = subprocess.Popen(  # noqa: ASYNC220 (killed below: it must not be awaited)
            [sys.executable, *argv],
            cwd=cluster_fakes.ROOT,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        with anyio.fail_after(60):
            while committed(out) < 4:  # the driver is in the middle of the suite
                assert driver.poll() is None, errors.read_text()
                await anyio.sleep(0.05)
    finally:
        driver.kill()
        driver.wait()
    before = {(r.task_id, k) for k, s in results(out).items() for r in s.results}
    assert 4 <= len(before) < 2 * len(RESUMED)
    reporter = Counting()
    summaries, report = await on_ray(
        out, FakeFactory(), RESUMED, KEYS, resume=True, reporter=reporter
    )
    assert reporter.total == 2 * len(RESUMED) - len(before)
    assert not before & set(reporter.triples)
    assert len(reporter.triples) == len(set(reporter.triples))
    for key in KEYS:
        assert [r.task_id for r in summaries[key].results] == [t.task_id for t in RESUMED]
    assert report.reruns == 0


def results(out: Path) -> dict[Key, RunSummary]:
    found = {}
    for key in KEYS:
        summary = read_summary(out / f"{key[0]}-{key[1]}" / "results.json")
        if summary is not None:
            found[key] = summary
    return found


def committed(out: Path) -> int:
    return sum(s.tasks_total for s in results(out).values())


def real_task(name: str, body: str, test: str) -> Task:
    starter = f'def {name}(a, b):\n    """{body}"""\n'
    return Task(
        meta=TaskMeta(task_id=f"complete_{name}", category="completion", difficulty=1),
        root="",
        problem=starter,
        starter=starter,
        tests={f"test_{name}.py": f"from solution import {name}\n\n\ndef test_it():\n{test}"},
        entry_point=name,
    )


@pytest.mark.real_model
async def test_the_real_coder_on_two_workers_runs_each_task_once_with_results_back(
    ray_session: str, tmp_path: Path
) -> None:
    """The bundled Qwen2.5-Coder 0.5B (the default profile's coder: the single arm loads
    only it), one worker of 1 CPU each, each assembling the model into its node's cache."""
    base = default_profile()
    code = msgspec.structs.replace(base.phase("code"), max_tokens=96)
    prof = msgspec.structs.replace(base, phases={**base.phases, "code": code})
    tasks = [
        real_task("add", "Return the sum of a and b.", "    assert add(2, 3) == 5\n"),
        real_task("larger", "Return the larger of a and b.", "    assert larger(2, 7) == 7\n"),
    ]
    with anyio.fail_after(600):
        summaries, report = await run_on_ray(
            tasks, prof, address=None, workers=2, out=tmp_path, modes=["overlap"],
            arms=["single"], options=RAY_OPTIONS,
        )  # fmt: skip
    results = summaries[("overlap", "single")].results
    assert [r.task_id for r in results] == ["complete_add", "complete_larger"]
    assert all(r.error is None and r.phases[0].tokens > 0 for r in results)
    assert results[0].passed  # the 0.5B completes `add`
    assert sorted(w.state for w in report.workers) == ["closed", "closed"]
    assert sum(w.tasks for w in report.workers) == 2
    logs = sorted((tmp_path / "overlap-single").glob("events-*.jsonl"))
    assert len(logs) == 2 and all(load_events(p)[1] == [] for p in logs)
