"""``python -m swapos.bench precheck DIR [DIR ...]``: today's no-model repairs and pre-grade
checks replayed on the candidates a run recorded.

For each ``bench run`` output folder ``DIR`` (its ``bench.json`` names the suite), each arm's
capsules, each distinct candidate (an artifact's code), it asks what the current code would
do with it before any check: the pre-grade defect (:func:`swapos.passes.defects.
candidate_defect`) and what :func:`swapos.passes.restore.restore_dropped` puts back (rules
1 to 3, as the task's category allows). It prints each candidate either acts on and the
counts, and above all **how many candidates that passed would be held** (a defect is a
failed check: a rule that holds a passing candidate is wrong). With ``--grade``, a candidate
the repairs change is graded again with the task's real tests, in the sandbox, before and
after, and the counts of tests passed are printed side by side.

A replay is not a run: what the draws do instead of a grade a defect saved, and what the
fixer does after a defect's verdict, is measured only by a run.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec

from swapos.capsule.schema import Capsule, decode_capsule
from swapos.data.task import Task
from swapos.errors import SwapOSError
from swapos.passes.edits import EDIT_CATEGORIES
from swapos.pipeline.identity import candidate_identity


class Replayed(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded candidate, and what the current rules do with it."""

    folder: str
    task_id: str
    attempt: int
    passed: bool
    starter: bool  # it is the task's starter unchanged (the policy held it already)
    defect: str
    restored: tuple[str, ...]
    code: str
    repaired: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="bench run --out folders")
    parser.add_argument(
        "--grade", action="store_true", help="grade each changed candidate before and after"
    )
    parser.add_argument("--out", help="write every candidate's verdict as JSON here")


def replay(folders: Sequence[Path]) -> list[Replayed]:
    """Every distinct recorded candidate of ``folders`` and what the rules do with it.

    Raises:
        SwapOSError: a folder is not a ``bench run`` output, or its suite cannot be loaded.
    """
    from swapos.passes.defects import candidate_defect
    from swapos.passes.restore import restore_dropped

    out: list[Replayed] = []
    for folder in folders:
        tasks = _suite(folder)
        for arm, capsule in _capsules(folder):
            task = tasks.get(capsule.meta.task_id)
            if task is None:
                continue
            seen: set[str] = set()
            for artifact in capsule.artifacts:
                if artifact.code in seen or not artifact.code.strip():
                    continue
                seen.add(artifact.code)
                exported = task.category in EDIT_CATEGORIES
                repaired, restored = restore_dropped(artifact.code, task.starter, exported=exported)
                out.append(
                    Replayed(
                        folder=f"{folder.name}/{arm}", task_id=task.task_id,
                        attempt=artifact.attempt, passed=artifact.passed is True,
                        starter=bool(task.starter.strip())
                        and candidate_identity(artifact.code) == candidate_identity(task.starter),
                        defect=candidate_defect(artifact.code, task),
                        restored=tuple(restored), code=artifact.code, repaired=repaired,
                    )
                )  # fmt: skip
    return out


def _suite(folder: Path) -> dict[str, Task]:
    from swapos.pipeline.tasks import load_suite

    manifest = folder / "bench.json"
    try:
        sessions = json.loads(manifest.read_text())["sessions"]
        spec = sessions[0]["argv"]["suite"]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise SwapOSError(
            f"{manifest}: not a bench run's manifest ({exc}); pass the --out folder of a "
            "`python -m swapos.bench run`"
        ) from exc
    return {t.task_id: t for t in load_suite(spec)}


def _capsules(folder: Path) -> Iterator[tuple[str, Capsule]]:
    for path in sorted(folder.glob("*/capsules/*.json")):
        try:
            yield path.parent.parent.name, decode_capsule(path.read_bytes())
        except (OSError, ValueError, msgspec.DecodeError):
            continue  # an unreadable capsule is no candidate


def summary(rows: Sequence[Replayed]) -> dict[str, int]:
    """The counts: candidates, those held by a defect (passing, failing, not the starter),
    those the repairs change (passing, failing)."""
    count: Counter[str] = Counter(candidates=len(rows))
    for r in rows:
        if r.defect:
            count["held, passed"] += r.passed
            count["held, failed"] += not r.passed
            count["held, failed, not the starter"] += not r.passed and not r.starter
        if r.restored:
            count["repaired, passed"] += r.passed
            count["repaired, failed"] += not r.passed
    return dict(count)


def main(args: argparse.Namespace) -> int:
    """Replay the pre-grade checks and repairs on recorded candidates; print what they do."""
    try:
        rows = replay([Path(d) for d in args.dirs])
    except SwapOSError as exc:
        print(f"error: {exc}")
        return 2
    graded: dict[int, tuple[int, int, int]] = {}
    if args.grade:
        graded = _graded(rows, args.dirs)
    for i, r in enumerate(rows):
        if r.defect and not r.starter:
            mark = "PASSED, HELD: " if r.passed else ""
            print(f"{mark}{r.folder} {r.task_id} attempt {r.attempt}: {r.defect}")
        if r.restored:
            heads = "; ".join(s.splitlines()[0] for s in r.restored)
            after = ""
            if i in graded:
                before, now, total = graded[i]
                after = f" tests {before}/{total} -> {now}/{total}"
            print(f"{r.folder} {r.task_id} attempt {r.attempt} restored: {heads}{after}")
    counts = summary(rows)
    print(json.dumps(counts))
    if args.out:
        Path(args.out).write_bytes(
            msgspec.json.format(msgspec.json.encode({"summary": counts, "candidates": rows}))
        )
    return 1 if counts.get("held, passed") else 0


def _graded(rows: Sequence[Replayed], dirs: Sequence[str]) -> dict[int, tuple[int, int, int]]:
    """Each changed candidate's tests passed before and after its repair, and the total."""
    from swapos.grader import grade

    tasks: dict[str, Task] = {}
    for d in dirs:
        tasks.update(_suite(Path(d)))
    graded: dict[int, tuple[int, int, int]] = {}
    for i, r in enumerate(rows):
        if r.restored:
            task = tasks[r.task_id]
            before, after = grade(task, r.code), grade(task, r.repaired)
            graded[i] = (before.tests_passed, after.tests_passed, after.tests_total)
    return graded
