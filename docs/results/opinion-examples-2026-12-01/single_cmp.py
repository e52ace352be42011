"""A single arm rerun on another machine vs the full run's, and the spliced pipeline vs it.

Usage: python single_cmp.py FULL_RUN SINGLE_RERUN [PIPELINE_RERUN ...]  (newest last; the
pipeline results are spliced as splice.py does). Output: single-today.txt beside it.
"""

import sys
from pathlib import Path

from swapos.bench.results import read_summary
from swapos.bench.stats import mcnemar, mcnemar_exact

full, today, *reruns = [Path(p) for p in sys.argv[1:]]
old = {r.task_id: r for r in read_summary(full / "overlap-single" / "results.json").results}
new = {r.task_id: r for r in read_summary(today / "overlap-single" / "results.json").results}
both = sorted(set(old) & set(new))
n = len(both)
before, now = sum(old[t].passed for t in both), sum(new[t].passed for t in both)
print(f"single: before {before}/{n}, today {now}/{n}")
print("  passed before only:", [t[-3:] for t in both if old[t].passed and not new[t].passed])
print("  passed today only:", [t[-3:] for t in both if new[t].passed and not old[t].passed])
s = read_summary(today / "overlap-single" / "results.json")
print(f"  today's mean wall {s.mean_wall_clock_s:.1f} s, host {s.host}")
pipe = {r.task_id: r for r in read_summary(full / "overlap-pipeline" / "results.json").results}
for r in reruns:
    pipe.update(
        {x.task_id: x for x in read_summary(r / "overlap-pipeline" / "results.json").results}
    )
sing = {t: new[t].passed for t in both}
m = mcnemar("pipeline", {t: pipe[t].passed for t in both}, "single", sing)
better = sum(pipe[t].pass_at_1 and not sing[t] for t in both)
worse = sum(sing[t] and not pipe[t].pass_at_1 for t in both)
p1 = mcnemar_exact(better, worse)
print(
    f"spliced pipeline vs today's single: {m.only_a}-{m.only_b}, p = {m.p_value:.2g}; "
    f"first graded: {better}-{worse} (p = {p1:.2g})"
)
