"""The grader's cost per grade: ``python -m swapos.bench grade [--rounds N] [--out FILE]``.

Grades every task of the builtin suite with its own reference solution (each must pass),
``--rounds`` times, and prints the median, mean and minimum of ``GradeResult.duration_s``
(sandbox set-up, pytest and tear-down included; no model runs). The figure of docs/grader.md.

To compare with another checkout (e.g. the code before a change), run this file as a script
with that checkout first on the path; it uses only ``grade`` and ``load_suite``, which every
version has::

    git worktree add /tmp/grader-old COMMIT
    PYTHONPATH=/tmp/grader-old python swapos/bench/grade/command.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=3, help="grades per task (default 3)")
    parser.add_argument("--out", help="write the durations and their summary as JSON here")


def measure(rounds: int) -> dict[str, object]:
    """Grade each builtin task's reference ``rounds`` times; the durations and summary."""
    import swapos
    from swapos.grader import grade
    from swapos.pipeline.tasks import load_suite

    tasks = [t for t in load_suite("builtin") if t.reference]
    durations: list[float] = []
    failed: list[str] = []
    for _ in range(rounds):
        for task in tasks:
            result = grade(task, task.reference or "")
            durations.append(result.duration_s)
            if not result.passed:
                failed.append(f"{task.task_id}: {result.outcome}: {result.reason}")
    return {
        "code": str(Path(swapos.__file__).resolve().parent),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tasks": len(tasks),
        "grades": len(durations),
        "median_s": statistics.median(durations),
        "mean_s": statistics.fmean(durations),
        "min_s": min(durations),
        "not_passed": failed,
        "durations_s": durations,
    }


def main(args: argparse.Namespace) -> int:
    """The grader's cost per grade over the builtin suite's references (no models)."""
    report = measure(args.rounds)
    print(
        f"grader cost ({report['code']}): {report['grades']} grades of {report['tasks']} "
        f"references: median {report['median_s']:.3f} s, mean {report['mean_s']:.3f} s, "
        f"min {report['min_s']:.3f} s"
    )
    for line in report["not_passed"]:  # type: ignore[attr-defined]
        print(f"  reference not graded pass: {line}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 1 if report["not_passed"] else 0


def _script(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="swapos/bench/grade/command.py", description=__doc__)
    add_arguments(parser)
    return main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(_script())
