"""The decode benchmark: what a verification batch costs, and what drafting would yield.

``python -m swapos.bench decode [--profile default] [--models large,small]
[--sizes 2,4,8,12] [--repeats 5] [--results DIR] [--ngrams 1,2,3] [--ks 4,8,12]
[--speed-cases 1] [--speed-rounds 1] [--speed-tokens 96] [--pair-cases 1] [--pair-lengths 2,4]
[--no-save] [--out decode-bench.json]``

Per model of the profile:

1. **Cost curve**: the wall of one decode batch of K tokens with logits at every position
   (what verifying K-1 drafted tokens costs) over the wall of one token, after a context of
   ``--context`` tokens, the sizes interleaved and repeated (medians); prefill and decode
   tok/s.
2. **Acceptance** of each lookup rule (n-gram at least ``--ngrams`` long, up to 3; drafts of
   up to ``--ks`` tokens), replayed on the recorded outputs of the capsules under
   ``--results`` (:mod:`~swapos.bench.decode.replay`), per phase kind: tokens per target
   pass, per-token acceptance, and the speed-up the curve predicts.
3. **Drafting vs plain**, measured: ``--speed-cases`` recorded prompts per kind decoded
   greedily both ways ``--speed-rounds`` times (order alternating; the medians), the
   speed-up measured and predicted, and whether the texts are the same.
4. **A smaller model drafting for a larger one** (:mod:`~swapos.bench.decode.pairs`), for
   each pair of the models with the same token table: ``--pair-cases`` recorded fix and
   code prompts decoded by the larger plain and drafted by the smaller at each of
   ``--pair-lengths``; the acceptance, the speed-up measured and the one rule 2 of
   ``policies/model_drafts.py`` predicts, and the length it would choose.
5. **The costs the policy reads** (:class:`~swapos.data.generation.DraftCosts`): saved in
   the user cache for this model file and thread count (``--no-save`` skips it), so later
   runs draft where it pays; also in the JSON report (``--out``), which a profile may pin.
6. **Targets** of issue 26, each a ``name/condition/value/limit/met`` record.

Timings on a busy machine are noise: the command prints the load average it ran under.
See ``docs/timings.md`` ("Drafting") for how to read the output.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec
from rich.console import Console
from rich.table import Table

from swapos.backends.llama.cost_curve import Curve, measure_curve, measuring_context
from swapos.backends.llama.draft_costs import save_cached
from swapos.backends.llama.handles import Handles
from swapos.backends.llama.loading import gguf_info, load_model
from swapos.bench.decode.measure import (
    RuleStats,
    SpeedCase,
    choose_costs,
    replay_rules,
    speed_case,
)
from swapos.bench.decode.pairs import PairCase, pair_cases
from swapos.bench.decode.replay import (
    KINDS,
    Recorded,
    find_capsules,
    recorded_phases,
    speed_pool,
)
from swapos.cliargs import positive_int
from swapos.data.generation import DraftCosts
from swapos.models.bundled import resolve_profile
from swapos.models.resolve import model_specs
from swapos.models.spec import ModelSpec
from swapos.policies.drafting import DraftRule
from swapos.sysinfo import host_info

Say = Callable[[str], None]


class Target(msgspec.Struct, frozen=True, kw_only=True):
    """One target checked: its value against its limit (as ``bench swap`` reports them)."""

    name: str
    condition: str
    value: float
    limit: float
    met: bool
    detail: str


class ModelReport(msgspec.Struct, frozen=True, kw_only=True):
    curve: Curve
    rules: list[RuleStats]
    costs: DraftCosts
    speed: list[SpeedCase]
    saved: str | None


class DecodeReport(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    run_at: str
    host: dict[str, str]
    load_average: float
    profile: str
    recorded_cases: int
    models: dict[str, ModelReport]
    targets: list[Target]
    pairs: list[PairCase] = []


def _ints(text: str) -> list[int]:
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 2,4,8 (got {text!r})") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers (got {text!r})")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--profile", default="default", help="profile TOML or builtin name (default: default)")
    add("--models", default=None, help="comma-separated model names (default: all local ones)")
    add("--sizes", type=_ints, default=[2, 4, 8, 12],
        help="verification batch sizes K, tokens (default: 2,4,8,12)")  # fmt: skip
    add("--repeats", type=int, default=5, help="timed batches per size (default: 5)")
    add("--context", type=int, default=256, help="context tokens before the batches")
    add("--results", type=Path, action="append", default=None,
        help="results folder(s) of `bench run` whose capsules are replayed (default: "
        "out/bench, bench run's default --out); repeatable")  # fmt: skip
    add("--ngrams", type=_ints, default=[1, 2, 3], help="shortest n-gram matches (default 1,2,3)")
    add("--ks", type=_ints, default=[4, 8, 12], help="draft caps K (default: 4,8,12)")
    add("--speed-cases", type=int, default=1,
        help="recorded prompts per phase kind decoded plain and drafted (default: 1)")  # fmt: skip
    add("--speed-rounds", type=positive_int, default=1,
        help="timings of each such prompt each way, order alternating; the medians are "
        "compared (default: 1; about 5 to tell a 3%% difference from noise)")  # fmt: skip
    add("--speed-tokens", type=int, default=96, help="max tokens of each (default: 96)")
    add("--pair-cases", type=int, default=1,
        help="recorded fix and code prompts per kind decoded by the larger of two models of "
        "one vocabulary, plain and drafted by the smaller (default: 1; 0 skips)")  # fmt: skip
    add("--pair-lengths", type=_ints, default=[2, 4],
        help="draft lengths the smaller model proposes (default: 2,4)")  # fmt: skip
    add("--no-save", action="store_true", help="do not cache the costs for later runs")
    add("--out", type=Path, default=Path("decode-bench.json"), help="JSON report")


def main(args: argparse.Namespace) -> int:
    """Decode bench: verification batch cost curve, lookup-draft acceptance, drafting vs plain."""
    console = Console(width=None if sys.stdout.isatty() else 150)
    report = run_bench(args, say=console.print)
    print_report(report, console)
    args.out.write_bytes(msgspec.json.format(msgspec.json.encode(report)))
    console.print(f"wrote {args.out}")
    return 0


def run_bench(args: argparse.Namespace, *, say: Say = print) -> DecodeReport:
    """Every part of the benchmark, model by model (one loaded at a time)."""
    profile = resolve_profile(args.profile)
    specs = [s for s in model_specs(profile).values() if not s.remote]
    if args.models:
        wanted = {m.strip() for m in args.models.split(",")}
        specs = [s for s in specs if s.name in wanted]
    folders = args.results or [Path("out/bench")]
    cases = recorded_phases(find_capsules([f for f in folders if f.is_dir()]))
    if cases:
        say(f"{len(cases)} recorded phases from {len(folders)} folder(s); load average "
            f"{os.getloadavg()[0]:.2f}")  # fmt: skip
    else:
        say(f"no recorded capsules under {', '.join(map(str, folders))}: the cost curve only "
            "(drafting then learns its acceptance as it decodes; for the acceptance replay and "
            "drafting vs plain, run a suite first, `python -m swapos.bench run --out DIR`, and "
            f"pass --results DIR); load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    rules = [DraftRule(ngram_min=n, ngram_max=3, k=k) for n in args.ngrams for k in args.ks]
    models: dict[str, ModelReport] = {}
    for spec in specs:
        models[spec.name] = _bench_model(spec, args, cases, rules, say)
    pairs: list[PairCase] = []
    if cases and args.pair_cases > 0:
        for target, drafter in draft_pairs(specs):
            pairs.extend(
                _bench_pair(target, drafter, models=models, cases=cases, args=args, say=say)
            )
    fix_model = profile.roles.get("fix")
    return DecodeReport(
        kind="decode", run_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), host=host_info(),
        load_average=os.getloadavg()[0], profile=profile.name, recorded_cases=len(cases),
        models=models, targets=targets(models, fix_model), pairs=pairs,
    )  # fmt: skip


def draft_pairs(specs: Sequence[ModelSpec]) -> list[tuple[ModelSpec, ModelSpec]]:
    """(target, drafter) for each two models with the same GGUF token table, the drafter
    the one with fewer tensor bytes (what decides whether it pays is the rule, on the
    measured steps; a noisy step must not turn a pair round)."""
    out: list[tuple[ModelSpec, ModelSpec]] = []
    for i, a in enumerate(specs):
        for b in specs[i + 1 :]:
            same = gguf_info(a.path).token_table_digest == gguf_info(b.path).token_table_digest
            if not same or not gguf_info(a.path).token_table_digest:
                continue
            size = {s.name: gguf_info(s.path).data_size for s in (a, b)}
            out.append((a, b) if size[a.name] > size[b.name] else (b, a))
    return out


def _bench_pair(
    target: ModelSpec, drafter: ModelSpec, *, models: dict[str, ModelReport],
    cases: list[Recorded], args: argparse.Namespace, say: Say,
) -> list[PairCase]:  # fmt: skip
    say(f"[{drafter.name} drafting for {target.name}] loading both")
    big = load_model(target, threading.Event())
    try:
        small = load_model(drafter, threading.Event())
        try:
            got = pair_cases(
                big, small, (models[target.name].costs, models[drafter.name].costs), cases,
                lengths=args.pair_lengths, per_kind=args.pair_cases, max_tokens=args.speed_tokens,
            )  # fmt: skip
        finally:
            small.close_sync()
    finally:
        big.close_sync()
    for c in got:
        say(f"  {c.kind} {c.task_id} d={c.length}: plain {c.plain_s:.2f}s, drafted "
            f"{c.drafted_s:.2f}s (x{c.measured:.2f}, predicted x{c.predicted:.2f}), acceptance "
            f"{c.acceptance:.2f}, rule's length {c.rule_length}, "
            f"{'same' if c.same_text else 'DIFFERENT'} text")  # fmt: skip
    return got


def _bench_model(
    spec: ModelSpec, args: argparse.Namespace, cases: list[Recorded], rules: list[DraftRule],
    say: Say,
) -> ModelReport:  # fmt: skip
    say(f"[{spec.name}] loading {spec.path}")
    model = load_model(spec, threading.Event())
    try:

        def work(h: Handles) -> ModelReport:
            context = measuring_context(h, args.context)
            curve = measure_curve(h, context, args.sizes, args.repeats)
            ratio = curve.verify_ratio()
            say(f"[{spec.name}] {curve.ms_per_token:.1f} ms/token; ratios "
                + ", ".join(f"{p.tokens}: x{p.ratio:.2f}" for p in curve.points))  # fmt: skip
            capped = (msgspec.structs.replace(r, k=min(r.k, len(ratio) - 1)) for r in rules)
            fitting = list(dict.fromkeys(capped))  # caps past the curve are one rule
            stats = replay_rules(h, cases, fitting, ratio) if cases else []
            costs = choose_costs(
                ratio, stats, source=f"bench decode {time.strftime('%F')}",
                step_s=curve.ms_per_token / 1000,
                prefill_s_per_token=1 / curve.prefill_tok_s if curve.prefill_tok_s else 0.0,
            )  # fmt: skip
            speed = _speed(h, costs, cases, args, say)
            return ModelReport(curve=curve, rules=stats, costs=costs, speed=speed, saved=None)

        rep = model.with_handles(work)
        if not args.no_save:
            rep = msgspec.structs.replace(rep, saved=str(save_cached(spec, rep.costs)))
        return rep
    finally:
        model.close_sync()


def _speed(
    h: Handles, costs: DraftCosts, cases: list[Recorded], args: argparse.Namespace, say: Say
) -> list[SpeedCase]:
    out: list[SpeedCase] = []
    for kind in KINDS:
        taken = 0
        for case in speed_pool(cases, kind):
            if taken >= args.speed_cases:
                break
            res = speed_case(
                h, costs, case, max_tokens=args.speed_tokens,
                draft_first=len(out) % 2 == 1, rounds=args.speed_rounds,
            )  # fmt: skip
            if res is None:
                continue
            taken += 1
            out.append(res)
            medians = f" (medians of {res.rounds})" if res.rounds > 1 else ""
            say(f"  {kind} {case.task_id}: plain {res.plain_s:.2f}s, drafted {res.draft_s:.2f}s"
                f"{medians} "
                f"(x{res.measured:.2f}, predicted x{res.predicted:.2f}), "
                f"{'same' if res.same_text else 'DIFFERENT'} text")  # fmt: skip
    return out


def targets(models: dict[str, ModelReport], fix_model: str | None) -> list[Target]:
    """Issue 26's targets that this benchmark measures (the pipeline ones need ``bench
    run``; draws side by side are measured by ``bench draws``)."""
    out: list[Target] = []
    for name, rep in models.items():
        if not rep.speed:
            continue
        plain = sum(s.plain_s for s in rep.speed)
        draft = sum(s.draft_s for s in rep.speed)
        measured = plain / draft if draft else 0.0
        predicted = _weighted(rep.speed)
        gap = abs(measured / predicted - 1) if predicted else 1.0
        out.append(Target(
            name="predicted speed-up within 10% of measured", condition=name, value=gap,
            limit=0.10, met=gap <= 0.10,
            detail=f"measured x{measured:.3f}, predicted x{predicted:.3f}",
        ))  # fmt: skip
        for kind in KINDS:
            group = [s for s in rep.speed if s.kind == kind]
            if not group:
                continue
            ratio = sum(s.plain_s for s in group) / max(sum(s.draft_s for s in group), 1e-9)
            out.append(Target(
                name=f"never slower: {kind}", condition=name, value=ratio, limit=0.97,
                met=ratio >= 0.97, detail=f"{len(group)} prompt(s), policy on vs plain",
            ))  # fmt: skip
            if kind == "fix" and name == fix_model:
                out.append(Target(
                    name="fix prompts decode >= 1.12x plain", condition=name, value=ratio,
                    limit=1.12, met=ratio >= 1.12, detail="the profile's fix model",
                ))  # fmt: skip
        differ = sum(not s.same_text for s in rep.speed) / len(rep.speed)
        out.append(Target(
            name="greedy text differs from plain (share)", condition=name, value=differ,
            limit=0.0, met=differ <= 0.0, detail=f"{len(rep.speed)} prompt(s)",
        ))  # fmt: skip
    return out


def _weighted(speed: Sequence[SpeedCase]) -> float:
    """The predicted speed-up of the cases together (their plain time as weights)."""
    plain = sum(s.plain_s for s in speed)
    drafted = sum(s.plain_s / s.predicted for s in speed if s.predicted > 0)
    return plain / drafted if drafted else 0.0


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    table = Table(title=title)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    return table


def print_report(report: DecodeReport, console: Console) -> None:
    """The tables: cost curves, replayed rules, drafting vs plain, targets."""
    items = report.models.items()
    console.print(_table(
        f"Verification cost (load average {report.load_average:.2f})",
        ("model", "ms/token", "decode tok/s", "prefill tok/s", "K: batch/one"),
        [(name, f"{r.curve.ms_per_token:.1f}", f"{r.curve.decode_tok_s:.1f}",
          f"{r.curve.prefill_tok_s:.1f}",
          "  ".join(f"{p.tokens}: x{p.ratio:.2f}" for p in r.curve.points))
         for name, r in items],
    ))  # fmt: skip
    console.print(_table(
        f"Lookup drafting replayed on {report.recorded_cases} recorded phases",
        ("model", "rule", "K", "kind", "cases", "tokens/pass", "acceptance", "predicted"),
        [(name, s.rule, str(s.k), s.kind, str(s.cases), f"{s.tokens_per_step:.2f}",
          f"{s.acceptance:.3f}", f"x{s.predicted_speedup:.2f}")
         for name, r in items for s in r.rules],
    ))  # fmt: skip
    console.print(_table(
        "Drafting vs plain (greedy, measured)",
        ("model", "kind", "task", "tokens", "plain s", "drafted s", "measured", "predicted",
         "accepted/drafted", "text"),
        [(name, c.kind, c.task_id, str(c.tokens), f"{c.plain_s:.2f}", f"{c.draft_s:.2f}",
          f"x{c.measured:.2f}", f"x{c.predicted:.2f}", f"{c.accepted}/{c.drafted}",
          "same" if c.same_text else "DIFFERENT")
         for name, r in items for c in r.speed],
    ))  # fmt: skip
    if report.pairs:
        console.print(_table(
            "A smaller model drafting for a larger one (greedy, measured; lookup off)",
            ("target", "drafter", "kind", "task", "d", "tokens", "plain s", "drafted s",
             "measured", "predicted", "acceptance", "rule's d", "text"),
            [(c.target, c.drafter, c.kind, c.task_id, str(c.length), str(c.tokens),
              f"{c.plain_s:.2f}", f"{c.drafted_s:.2f}", f"x{c.measured:.2f}",
              f"x{c.predicted:.2f}", f"{c.acceptance:.2f}", str(c.rule_length),
              "same" if c.same_text else "DIFFERENT")
             for c in report.pairs],
        ))  # fmt: skip
    console.print(_table(
        "Targets",
        ("verdict", "model", "target", "value", "limit", "detail"),
        [("[green]MET[/green]" if t.met else "[red]MISSED[/red]", t.condition, t.name,
          f"{t.value:.3f}", f"{t.limit:.3f}", t.detail)
         for t in report.targets],
    ))  # fmt: skip
