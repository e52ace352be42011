"""``bench precheck``: the pre-grade checks and repairs replayed on a run's recorded
candidates (a run folder made here, the builtin suite's real task, the real grader)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from swapos.bench import precheck
from swapos.capsule.schema import Artifact, encode_capsule, with_artifact
from swapos.pipeline.prompts import capsule_for_task
from swapos.pipeline.tasks import load_suite

SLUGIFY = next(t for t in load_suite("builtin") if t.task_id == "feature_slugify")
RIGHT = (
    "import re\n\n\ndef slugify(title: str) -> str:\n"
    '    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")\n'
)  # passes, but leaves out the starter's title_case, which the tests import
TITLE_ONLY = SLUGIFY.starter.replace("word.capitalize()", "word.title()")  # lacks slugify
BROKEN = 'def slugify(title):\n    return """\n'


def run_folder(tmp_path: Path, *codes: tuple[str, bool | None]) -> Path:
    folder = tmp_path / "run"
    capsules = folder / "overlap-pipeline" / "capsules"
    capsules.mkdir(parents=True)
    manifest = {"sessions": [{"argv": {"suite": "builtin"}, "task_ids": [SLUGIFY.task_id]}]}
    (folder / "bench.json").write_text(json.dumps(manifest))
    capsule = capsule_for_task(SLUGIFY)
    for i, (code, passed) in enumerate(codes, 1):
        artifact = Artifact(attempt=i, phase="code", code=code, passed=passed)
        capsule = with_artifact(capsule, artifact)
    (capsules / f"{SLUGIFY.task_id}.json").write_bytes(encode_capsule(capsule))
    return folder


def test_each_recorded_candidate_is_replayed_and_counted(tmp_path: Path) -> None:
    folder = run_folder(tmp_path, (TITLE_ONLY, False), (BROKEN, False), (RIGHT, False))
    rows = precheck.replay([folder])
    assert [bool(r.defect) for r in rows] == [True, True, False]
    assert "does not define `slugify`" in rows[0].defect
    assert rows[1].defect.startswith("the candidate is not valid Python")
    assert [s.splitlines()[0] for s in rows[2].restored] == ["def title_case(text: str) -> str:"]
    assert precheck.summary(rows) == {
        "candidates": 3, "held, passed": 0, "held, failed": 2,
        "held, failed, not the starter": 2, "repaired, passed": 0, "repaired, failed": 1,
    }  # fmt: skip


def test_grade_shows_the_repair_in_tests_passed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = run_folder(tmp_path, (RIGHT, False))
    args = argparse.Namespace(dirs=[str(folder)], grade=True, out=str(tmp_path / "o.json"))
    assert precheck.main(args) == 0
    out = capsys.readouterr().out
    assert "restored: def title_case(text: str) -> str: tests 0/6 -> 6/6" in out
    saved = json.loads((tmp_path / "o.json").read_text())
    assert saved["summary"]["repaired, failed"] == 1


def test_a_passing_candidate_held_is_an_error(tmp_path: Path) -> None:
    folder = run_folder(tmp_path, (TITLE_ONLY, True))  # recorded as passed: the rule is wrong
    args = argparse.Namespace(dirs=[str(folder)], grade=False, out=None)
    assert precheck.main(args) == 1


def test_a_folder_that_is_no_run_says_what_to_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = argparse.Namespace(dirs=[str(tmp_path)], grade=False, out=None)
    assert precheck.main(args) == 2
    assert "pass the --out folder of a `python -m swapos.bench run`" in capsys.readouterr().out
