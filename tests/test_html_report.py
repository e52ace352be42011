"""HTML reports (``bench report --html``, ``bench replay --html``, ``run --html``) of a
small suite run on fake models: self-contained, the markdown report's numbers, every task's
capsule readable, generated text shown as text."""

from __future__ import annotations

import html.parser
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import msgspec
import pytest

from swapos.actors.system import System
from swapos.backends.fake import FakeModelScript
from swapos.bench.cli import main as bench_main
from swapos.bench.replay import load_events, replay
from swapos.bench.results import read_summary
from swapos.bench.suite.command import run_bench
from swapos.data.task import Task, TaskMeta
from swapos.models.profile import Mode, Profile
from swapos.run import write_html
from swapos.testing import FakeClock
from tests.fakes import fake_system
from tests.fakes import pipeline_profile as profile

HOSTILE = "</pre><script>window.owned=1</script>"
ANSWER = f"def add(a, b):\n    return a + b  # {HOSTILE}\n```"
"""The coder's answer: right for ``add``, wrong for ``mul``; its comment is markup."""


def _task(name: str, op: str, category: str) -> Task:
    test = f"from solution import {name}\n\n\ndef test_it():\n    assert {name}(2, 3) == 2 {op} 3\n"
    return Task(
        meta=TaskMeta(task_id=name, category=category, difficulty=3, description=name),
        root="",
        problem=f"`{name}(a, b)` should return a {op} b.",
        starter=f"def {name}(a, b):\n    return 0\n",
        tests={"test_it.py": test},
    )


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A suite run (2 tasks, overlap and sequential, pipeline and single) on fake models:
    ``add`` passes, ``mul`` fails every attempt."""
    out = tmp_path_factory.mktemp("bench")
    scripts = {
        "planner": FakeModelScript(load_s=1.0, token_s=0.05, reply="Return the result.\n\n"),
        "coder": FakeModelScript(load_s=2.0, token_s=0.05, reply=ANSWER),
        "critic": FakeModelScript(load_s=1.0, token_s=0.05, reply="Use the right operator.\n\n"),
    }
    clock = FakeClock()

    @asynccontextmanager
    async def factory(prof: Profile, mode: Mode, events: Path) -> AsyncIterator[System]:
        async with fake_system(
            scripts, budget=250, clock=clock, profile=prof, mode=mode, event_log=events
        ) as (system, _):
            yield system

    async def bench() -> None:
        with anyio.fail_after(300):  # real sandboxed grades, on a busy machine
            async with clock.autojump():
                await run_bench(
                    [_task("add", "+", "bugfix"), _task("mul", "*", "feature")],
                    profile(),
                    out=out,
                    modes=["overlap", "sequential"],
                    arms=["pipeline", "single"],
                    factory=factory,
                    clock=clock,
                )

    anyio.run(bench)
    assert bench_main(["report", str(out), "--html"]) == 0
    return out


class _Tables(html.parser.HTMLParser):
    """Every table's rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def html_tables(text: str) -> list[list[list[str]]]:
    parser = _Tables()
    parser.feed(text)
    return parser.tables


def markdown_tables(text: str) -> list[list[list[str]]]:
    tables: list[list[list[str]]] = []
    previous = ""
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            if not previous.startswith("|"):
                tables.append([])
            tables[-1].append([c.strip() for c in line.strip("|").split(" | ")])
        previous = line
    return tables


def assert_self_contained(page: str) -> None:
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert "http://" not in page and "https://" not in page
    for fetching in ("<link", "<script", "<iframe", "<img", "@import", "url("):
        assert fetching not in page.lower()


def test_the_html_report_is_self_contained_and_shows_the_markdown_reports_numbers(
    suite_run: Path,
) -> None:
    page = (suite_run / "report.html").read_text()
    assert_self_contained(page)
    md = markdown_tables((suite_run / "report.md").read_text())
    assert len(md) == 7  # arms, categories, ratios, hidden loads, McNemar, breakdown, phases
    tables = html_tables(page)
    for table in md:
        assert table in tables, table[0]
    # Per category: add (bugfix) passes in every mode-arm, mul (feature) in none.
    categories = next(t for t in tables if t[0][:2] == ["mode-arm", "category"])
    assert ["overlap-pipeline", "bugfix", "1", "1", "100%"] in categories
    assert ["overlap-pipeline", "feature", "1", "0", "0%"] in categories


def test_the_html_report_draws_the_timeline_and_makes_each_capsule_readable(
    suite_run: Path,
) -> None:
    page = (suite_run / "report.html").read_text()
    assert "<h2>Timeline (overlap-pipeline)</h2>" in page
    svg = page[page.index("<svg") : page.index("</svg>")]
    for kind in ("hidden", "paid", "request"):
        assert f'data-kind="{kind}"' in svg  # overlap prefetched the coder: part hidden
    # mul's pipeline run: its attempts, the grader's verdict, the critic, the decisions.
    summary = read_summary(suite_run / "overlap-pipeline" / "results.json")
    assert summary is not None
    mul = next(r for r in summary.results if r.task_id == "mul")
    assert not mul.passed and mul.iterations == 2
    start = page.index("mul (feature): failed")
    block = page[start : page.index('<details class="task">', start)]
    assert "Attempt 1: " in block and "Attempt 2: " in block  # what was tried
    assert "grader (0/1 tests)" in block and "assert 0 == 6" in block  # why it failed
    assert "Decisions" in block and "repeats attempt 1" in block  # what the pipeline chose
    # The answer's markup is shown as text.
    assert "&lt;/pre&gt;&lt;script&gt;window.owned=1&lt;/script&gt;" in block
    assert HOSTILE not in page


def test_replay_and_run_pages_come_from_the_same_records(suite_run: Path, tmp_path: Path) -> None:
    log = suite_run / "overlap-pipeline" / "events.jsonl"
    out = tmp_path / "replay.html"
    assert bench_main(["replay", str(log), "--html", str(out)]) == 0
    page = out.read_text()
    assert_self_contained(page)
    summary = replay(log)
    metrics = {row[0]: row[1] for row in html_tables(page)[0][1:]}
    assert metrics["tasks_passed"] == str(summary.tasks_passed) == "1"
    assert metrics["load_hidden_fraction"] == f"{summary.load_hidden_fraction:.4f}"
    assert 'data-kind="hidden"' in page

    # A run's folder (result, capsule, events) gives the task's page.
    run = tmp_path / "run"
    run.mkdir()
    result = next(r for r in summary.results if r.task_id == "add")
    (run / "result.json").write_bytes(msgspec.json.encode(result))
    (run / "capsule.json").write_bytes(
        (suite_run / "overlap-pipeline/capsules/add.json").read_bytes()
    )
    (run / "events.jsonl").write_bytes(log.read_bytes())
    page = write_html(run).read_text()
    assert_self_contained(page)
    phases = html_tables(page)[0]
    assert [row[0] for row in phases[1:]] == [p.phase for p in result.phases]
    assert [row[3] for row in phases[1:]] == [f"{p.load_s:.3f}" for p in result.phases]
    assert "Attempt 1: " in page and load_events(log)[0]
