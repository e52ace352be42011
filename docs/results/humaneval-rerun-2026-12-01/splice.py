"""Splice a rerun of some HumanEval tasks into a full run of the same suite.

Usage: python splice.py FULL_RUN RERUN  (the --out folders of `swapos.bench run`)

The rerun's pipeline results replace the full run's for the same task ids; the single arm is
the full run's. This is how the figures of the newer code were got for all 164 problems
without rerunning the 137 tasks whose first attempt passed: the newer code changes nothing
up to a passing first attempt (the same greedy candidate, the same draws with the same
recorded seeds, the same checks), so those tasks end as they did. The script shows how far
that holds: for each rerun task, whether every code, self-check and grade phase of attempt 1
(model, prompt and generated token counts, outcome) repeated the full run's. Per-task figures
only (pass counts, pass@1, rescues, McNemar, mean wall): run-wide counters (loads, hidden
fraction) belong to one system's session and are not spliced.
"""

import sys
from pathlib import Path

from swapos.bench.results import read_summary
from swapos.bench.stats import mcnemar, mcnemar_exact
from swapos.records.schema import RunInfo, TaskResult
from swapos.records.summary import summarize


def first_attempt(r: TaskResult) -> list[tuple[object, ...]]:
    return [
        (p.phase, p.model, p.prompt_tokens, p.tokens, p.outcome)
        for p in r.phases
        if p.attempt <= 1 and p.phase != "critic"  # the review of a failure is not its search
    ]


def main(full: Path, rerun: Path) -> None:
    old = read_summary(full / "overlap-pipeline" / "results.json")
    single = read_summary(full / "overlap-single" / "results.json")
    new = read_summary(rerun / "overlap-pipeline" / "results.json")
    assert old and single and new
    before = {r.task_id: r for r in old.results}
    redone = {r.task_id: r for r in new.results}
    same = [t for t in redone if first_attempt(redone[t]) == first_attempt(before[t])]
    differ = sorted(set(redone) - set(same))
    print(f"rerun tasks {len(redone)}; attempt 1 phase by phase as in the full run: {len(same)}")
    if differ:
        print("attempt 1 differs (a near-tie decoded otherwise):", ", ".join(differ))
    flipped = [t for t in redone if redone[t].pass_at_1 != before[t].pass_at_1]
    print("first graded candidate passed in one run only:", ", ".join(flipped) or "-")
    spliced = [redone.get(r.task_id, r) for r in old.results]
    for name, results in (("full run", old.results), ("spliced", spliced)):
        s = summarize(results, RunInfo())
        n, p1 = s.tasks_total, round(s.pass_at_1 * s.tasks_total)
        print(
            f"{name}: passed {s.tasks_passed}/{n} ({s.pass_rate:.1%}), pass@1 {p1}, "
            f"draw {s.draw_rescued}, retry rescue {s.retry_rescued}/{n - p1} "
            f"({s.retry_rescue_rate:.1%}), mean wall {s.mean_wall_clock_s:.1f} s"
        )
        pipe = {r.task_id: r.passed for r in results}
        first = {r.task_id: r.pass_at_1 for r in results}
        sing = {r.task_id: r.passed for r in single.results}
        m = mcnemar("pipeline", pipe, "single", sing)
        better = sum(first[t] and not sing[t] for t in sing)
        worse = sum(sing[t] and not first[t] for t in sing)
        print(
            f"  McNemar vs single: {m.only_a}-{m.only_b}, p = {m.p_value:.2g}; first graded "
            f"candidate vs single: {better} better, {worse} worse "
            f"(p = {mcnemar_exact(better, worse):.2g})"
        )
    rr = list(redone.values())
    print(
        "rerun tasks: passed", sum(r.passed for r in rr), "of", len(rr),
        "| before:", sum(before[t].passed for t in redone),
        "| passed at attempt:", sorted(r.passed_attempt for r in rr if r.passed),
    )
    gained = [t for t in redone if redone[t].passed and not before[t].passed]
    lost = [t for t in redone if before[t].passed and not redone[t].passed]
    print("newly passed:", ", ".join(gained) or "-", "| newly failed:", ", ".join(lost) or "-")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
