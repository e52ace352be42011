"""Splice reruns of some tasks into a full run of the same suite, newest last.

Usage: python splice.py FULL_RUN RERUN [RERUN ...]  (the --out folders of `swapos.bench run`)

Each rerun's pipeline results replace the earlier ones for the same task ids; the single arm
is the full run's. A rerun holds the tasks whose path the newer rule can change: here, the
recap, which acts only when a candidate repeats a failed one, so only tasks with such a
repeat in the results they replace were rerun (none of them had passed). The script shows
how far the premise holds: for each rerun task, the first phase (model, prompt and
generated token counts, outcome) that differs from the results it replaces. A repeat comes
only after a failed grade, so nothing differs before the first grade's feedback is read; the
runs before commit 991dd83 also differ there by chance, since pytest's output showed memory
addresses (a new one every run) that reached the critic's and fixer's prompts; and a prefix
restored from the KV cache is computed in other batches than a full prefill, so a near-tie
can decode otherwise anywhere. Per-task figures only (pass counts, pass@1, rescues, McNemar,
mean wall): run-wide counters (loads, hidden fraction) belong to one system's session and
are not spliced.
"""

import sys
from pathlib import Path

from swapos.bench.results import read_summary
from swapos.bench.stats import mcnemar, mcnemar_exact
from swapos.records.schema import RunInfo, TaskResult
from swapos.records.summary import summarize


def phases(r: TaskResult) -> list[tuple[object, ...]]:
    return [(p.attempt, p.phase, p.model, p.prompt_tokens, p.tokens, p.outcome) for p in r.phases]


def first_difference(a: TaskResult, b: TaskResult) -> str:
    """The first phase (attempt and name) that differs between two runs of a task."""
    for x, y in zip(phases(a), phases(b), strict=False):
        if x != y:
            return f"attempt {y[0]} {y[1]}"
    return "none" if len(a.phases) == len(b.phases) else "the end"


def report(name: str, results: list[TaskResult], single: dict[str, bool]) -> None:
    s = summarize(results, RunInfo())
    n, p1 = s.tasks_total, round(s.pass_at_1 * s.tasks_total)
    print(
        f"{name}: passed {s.tasks_passed}/{n} ({s.pass_rate:.1%}), pass@1 {p1}, "
        f"draw {s.draw_rescued}, retry rescue {s.retry_rescued}/{n - p1} "
        f"({s.retry_rescue_rate:.1%}), mean wall {s.mean_wall_clock_s:.1f} s"
    )
    pipe = {r.task_id: r.passed for r in results}
    first = {r.task_id: r.pass_at_1 for r in results}
    m = mcnemar("pipeline", pipe, "single", single)
    better = sum(first[t] and not single[t] for t in single)
    worse = sum(single[t] and not first[t] for t in single)
    print(
        f"  McNemar vs single: {m.only_a}-{m.only_b}, p = {m.p_value:.2g}; first graded "
        f"candidate vs single: {better} better, {worse} worse "
        f"(p = {mcnemar_exact(better, worse):.2g})"
    )


def main(full: Path, reruns: list[Path]) -> None:
    old = read_summary(full / "overlap-pipeline" / "results.json")
    single = read_summary(full / "overlap-single" / "results.json")
    assert old and single
    sing = {r.task_id: r.passed for r in single.results}
    current = {r.task_id: r for r in old.results}
    report(f"{full.name}", list(current.values()), sing)
    for rerun in reruns:
        new = read_summary(rerun / "overlap-pipeline" / "results.json")
        assert new
        redone = {r.task_id: r for r in new.results}
        print(f"\n{rerun.name}: {len(redone)} tasks rerun")
        for t, r in redone.items():
            before = current[t]
            d = first_difference(before, r)
            print(
                f"  {t}: before {'pass' if before.passed else 'fail'} (attempt "
                f"{before.passed_attempt}), now {'pass' if r.passed else 'fail'} (attempt "
                f"{r.passed_attempt}); first differing phase: {d}"
            )
        gained = [t for t in redone if redone[t].passed and not current[t].passed]
        lost = [t for t in redone if current[t].passed and not redone[t].passed]
        print("  newly passed:", ", ".join(gained) or "-", end=" | ")
        print("newly failed:", ", ".join(lost) or "-")
        current.update(redone)
        report(f"  spliced with {rerun.name}", [current[r.task_id] for r in old.results], sing)


if __name__ == "__main__":
    main(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
