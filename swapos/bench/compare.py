"""``comparison.json``: the ratios that matter between modes and arms (docs/reports.md). Pure.

Built from the per-mode/arm run summaries alone, so ``report`` can rebuild it at any time
from the results files.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import msgspec

from swapos.bench.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, McNemar, RatioStats, ratio_stats
from swapos.bench.stats import mcnemar as paired_mcnemar
from swapos.models.profile import MODES, Mode
from swapos.records.schema import RunSummary

MODE_ORDER: tuple[str, ...] = MODES
ARM_ORDER = ("pipeline", "single")
RATIOS: tuple[tuple[Mode, Mode], ...] = (
    ("overlap", "lru"),
    ("overlap", "resident"),
    ("lru", "resident"),
    ("sequential", "resident"),
    ("overlap", "sequential"),
)
"""Wall-time ratios reported, as (numerator mode, denominator mode)."""

Key = tuple[str, str]
"""(mode, arm)."""


class ArmStats(msgspec.Struct, frozen=True, kw_only=True):
    """Headline figures of one mode/arm.

    ``retry_rescued``: tasks whose first graded candidate failed and a later one passed
    (``retry_rescue_rate``: of the tasks whose first graded candidate failed).
    ``draw_rescued``: tasks whose first candidate failed its examples and a drawn one,
    graded in its place, passed (counted in ``pass_at_1``; a task whose draws all failed and
    whose fixer then passed is not).
    ``breakdown``: the mean seconds per task of :data:`BREAKDOWN` (``other``: the rest of
    the task's wall time: tokenizing, prompt building, messages).
    """

    mode: str
    arm: str
    tasks: int
    passed: int
    pass_rate: float
    pass_at_1: float
    mean_wall_clock_s: float
    total_task_wall_s: float
    load_hidden_fraction: float
    retry_rescued: int = 0
    retry_rescue_rate: float = 0.0
    draw_rescued: int = 0
    breakdown: dict[str, float] = msgspec.field(default_factory=dict)


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    """Everything ``comparison.json`` holds.

    Attributes:
        arms: ``"<mode>-<arm>"`` -> its headline figures.
        wall_ratios: arm -> ``"overlap/resident"`` (etc.) -> per-task wall-time ratios; for
            a ``pipeline:<knobs>`` arm also ``"<mode>: <arm>/pipeline"``, against the
            pipeline in the same mode.
        hidden_load_fraction: mode -> hidden / (hidden + paid) load time, over every arm.
        mcnemar_arms: per mode, ``pipeline`` vs ``single`` on pass/fail.
        mcnemar_modes: per arm, each pair of modes on pass/fail.
        first_attempt: per mode, the ``pipeline`` arm's first graded candidate
            (``pass_at_1``) vs the ``single`` arm, paired: ``only_a`` is where the
            pipeline's first attempt is better, ``only_b`` where it is worse.
        bootstrap: how the intervals were computed.
    """

    arms: dict[str, ArmStats]
    wall_ratios: dict[str, dict[str, RatioStats]]
    hidden_load_fraction: dict[str, float]
    mcnemar_arms: list[McNemar]
    mcnemar_modes: list[McNemar]
    bootstrap: dict[str, float]
    first_attempt: list[McNemar] = msgspec.field(default_factory=list)


def label(key: Key) -> str:
    return f"{key[0]}-{key[1]}"


def ordered(keys: list[Key]) -> list[Key]:
    """Keys in display order: modes, then arms, as in :data:`MODE_ORDER` / :data:`ARM_ORDER`."""

    def rank(key: Key) -> tuple[int, int, Key]:
        mode, arm = key
        m = MODE_ORDER.index(mode) if mode in MODE_ORDER else len(MODE_ORDER)
        a = ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER)
        return m, a, key

    return sorted(keys, key=rank)


def compare(summaries: Mapping[Key, RunSummary], *, seed: int = DEFAULT_SEED) -> Comparison:
    """The comparison of every mode/arm in ``summaries``, paired by task id."""
    keys = ordered(list(summaries))
    walls = {k: {r.task_id: r.wall_clock_s for r in summaries[k].results} for k in keys}
    passed = {k: {r.task_id: r.passed for r in summaries[k].results} for k in keys}
    arms = [a for a in ARM_ORDER if any(k[1] == a for k in keys)]
    arms += sorted({k[1] for k in keys} - set(arms))
    modes = [m for m in MODE_ORDER if any(k[0] == m for k in keys)]
    modes += sorted({k[0] for k in keys} - set(modes))
    wall_ratios: dict[str, dict[str, RatioStats]] = {}
    for arm in arms:
        ratios = {
            f"{num}/{den}": ratio_stats(walls[(num, arm)], walls[(den, arm)], seed=seed)
            for num, den in RATIOS
            if (num, arm) in walls and (den, arm) in walls
        }
        for mode in modes if arm.startswith("pipeline:") else ():
            if (mode, arm) in walls and (mode, "pipeline") in walls:
                name = f"{mode}: {arm}/pipeline"  # one lever changed, against the pipeline
                ratios[name] = ratio_stats(walls[(mode, arm)], walls[(mode, "pipeline")], seed=seed)
        if ratios:
            wall_ratios[arm] = ratios
    mcnemar_arms = [
        paired_mcnemar(label((m, a)), passed[(m, a)], label((m, b)), passed[(m, b)])
        for m in modes
        for a, b in itertools.combinations(arms, 2)
        if (m, a) in passed and (m, b) in passed
    ]
    mcnemar_modes = [
        paired_mcnemar(label((x, arm)), passed[(x, arm)], label((y, arm)), passed[(y, arm)])
        for arm in arms
        for x, y in itertools.combinations(modes, 2)
        if (x, arm) in passed and (y, arm) in passed
    ]
    first = {k: {r.task_id: r.pass_at_1 for r in summaries[k].results} for k in keys}
    first_attempt = [
        paired_mcnemar(
            f"{label((m, 'pipeline'))} first attempt", first[(m, "pipeline")],
            label((m, "single")), passed[(m, "single")],
        )
        for m in modes
        if (m, "pipeline") in first and (m, "single") in passed
    ]  # fmt: skip
    return Comparison(
        first_attempt=first_attempt,
        arms={label(k): _arm_stats(k, summaries[k]) for k in keys},
        wall_ratios=wall_ratios,
        hidden_load_fraction={m: _hidden_fraction(summaries, m) for m in modes},
        mcnemar_arms=mcnemar_arms,
        mcnemar_modes=mcnemar_modes,
        bootstrap={"level": 0.95, "resamples": DEFAULT_RESAMPLES, "seed": seed},
    )


def _arm_stats(key: Key, s: RunSummary) -> ArmStats:
    return ArmStats(
        mode=key[0],
        arm=key[1],
        tasks=s.tasks_total,
        passed=s.tasks_passed,
        pass_rate=s.pass_rate,
        pass_at_1=s.pass_at_1,
        mean_wall_clock_s=s.mean_wall_clock_s,
        total_task_wall_s=sum(r.wall_clock_s for r in s.results),
        load_hidden_fraction=s.load_hidden_fraction,
        retry_rescued=s.retry_rescued,
        retry_rescue_rate=s.retry_rescue_rate,
        draw_rescued=s.draw_rescued,
        breakdown=breakdown(s),
    )


BREAKDOWN = ("load_paid", "load_hidden", "evict", "prefill", "decode", "grade", "other")
"""Where a task's wall time goes (``load_hidden`` is work off the critical path)."""


def breakdown(s: RunSummary) -> dict[str, float]:
    """Mean seconds per task of each part of :data:`BREAKDOWN`.

    A part's time is the union of its intervals within the task, so phases that run at the
    same time (draws decoding side by side) count their common time once; different parts
    can still overlap (a draw's check runs while the others decode), and ``other`` is what
    the parts leave of the task's wall (never below 0)."""
    n = len(s.results) or 1
    sums = dict.fromkeys(BREAKDOWN, 0.0)
    for r in s.results:
        spans: dict[str, list[tuple[float, float]]] = {k: [] for k in BREAKDOWN}
        for p in r.phases:
            end = p.started_t + p.total_s
            if p.phase in ("grade", "selfcheck"):
                spans["grade"].append((p.started_t, end))
                continue
            decode_from = end - p.gen_s
            spans["decode"].append((decode_from, end))
            spans["prefill"].append((decode_from - p.prefill_s, decode_from))
            load_to = p.started_t + p.evict_s + p.load_s
            spans["evict"].append((p.started_t, p.started_t + p.evict_s))
            spans["load_paid"].append((p.started_t + p.evict_s, load_to))
            sums["load_hidden"] += p.load_hidden_s  # off the critical path: not in the wall
        spent = 0.0
        for part, intervals in spans.items():
            covered = union_length(intervals)
            sums[part] += covered
            spent += covered
        sums["other"] += max(0.0, r.wall_clock_s - spent)
    return {k: v / n for k, v in sums.items()}


def union_length(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of ``intervals`` (empty or reversed ones count 0)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted((a, b) for a, b in intervals if b > a):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def _hidden_fraction(summaries: Mapping[Key, RunSummary], mode: str) -> float:
    paid = sum(s.total_load_s for k, s in summaries.items() if k[0] == mode)
    hidden = sum(s.total_load_hidden_s for k, s in summaries.items() if k[0] == mode)
    return hidden / (hidden + paid) if hidden + paid > 0 else 0.0
