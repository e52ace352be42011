"""The KV prefix cache benchmark: retry phases with the cache off and on, on real models.

``python -m swapos.bench kv [--tasks 3] [--max-attempts 3] [--max-tokens 48] [--out kv.json]``

Three systems on the default profile stay open side by side and take the same tasks in
turn (interleaved, so drift on the machine hits every condition alike):

- **off**: no KV cache;
- **on**: RAM and disk tiers (a fresh temporary disk directory);
- **on-evict**: the same, with a memory budget that holds one model, so the coder is
  evicted and reloaded between its attempts and its prefix state must outlive it.

For each condition it sums, over the *retry phases* (code attempts >= 2 and critic phases),
prefill tokens and seconds, tokens restored from the cache, restore hits and time to first
token, and checks the target: retry-phase prefill time reduced by >= 95% vs off. Critic
attempt 1 is reported apart as well: it is a first read (nothing can have been saved for
it yet), so the target is also shown over repeated phases only. ``--max-tokens`` caps each
phase's generation to keep the run short; prefill, which is what the cache saves, is
unaffected.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import msgspec
from rich.console import Console
from rich.table import Table

from swapos.actors.system import System, open_system
from swapos.models.bundled import resolve_profile
from swapos.models.profile import Profile
from swapos.pipeline.tasks import load_suite
from swapos.records.schema import PhaseRecord
from swapos.records.summary import kv_served
from swapos.sysinfo import host_info

TARGET_REDUCTION = 0.95
CONDITIONS = ("off", "on", "on-evict")
RELOAD_MIN_S = 0.05  # a prefetch that found the model resident takes microseconds
ONE_MODEL_BUDGET = 700 * 2**20  # the largest default model (F16 planner) is ~602 MiB


class GroupStats(msgspec.Struct, frozen=True, kw_only=True):
    """Sums over one group of phases of one condition."""

    phases: int
    prompt_tokens: int
    prefill_tokens: int
    prefill_s: float
    kv_restored_tokens: int
    kv_servable_tokens: int
    """Prompt tokens the same model had read earlier in the task (docs/timings.md)."""
    kv_served_share: float
    """Restored of those servable (each phase's restored tokens up to its servable ones)."""
    restore_hits: int
    mean_ttft_s: float
    reloaded: int
    """Phases whose model was loaded for them (paid or prefetched, > 50 ms)."""


class ConditionReport(msgspec.Struct, frozen=True, kw_only=True):
    condition: str
    budget_bytes: int
    wall_s: float
    groups: dict[str, GroupStats]
    kv_statistics: dict[str, object]
    event_log: str


class TargetCheck(msgspec.Struct, frozen=True, kw_only=True):
    condition: str
    group: str
    off_prefill_s: float
    on_prefill_s: float
    reduction: float
    target: float
    met: bool


class KVReport(msgspec.Struct, frozen=True, kw_only=True):
    host: dict[str, str]
    command: str
    tasks: list[str]
    max_attempts: int
    max_tokens: int
    conditions: list[ConditionReport]
    targets: list[TargetCheck]


GROUPS: dict[str, Callable[[PhaseRecord], bool]] = {
    "retry": lambda p: (p.phase == "code" and p.attempt >= 2) or p.phase == "critic",
    "code>=2": lambda p: p.phase == "code" and p.attempt >= 2,
    "critic>=2": lambda p: p.phase == "critic" and p.attempt >= 2,
    "critic 1": lambda p: p.phase == "critic" and p.attempt == 1,
    "repeats": lambda p: p.phase in ("code", "critic") and p.attempt >= 2,
}
"""Phase groups: ``retry`` = code attempts >= 2 and every critic phase (the target's
definition); ``repeats`` = code and critic attempts >= 2 (phases that read a prefix before)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", default="builtin", help="task suite (default: builtin)")
    parser.add_argument("--profile", default="tiny", help="profile TOML or builtin name")
    parser.add_argument("--tasks", type=int, default=3, help="tasks to run (default: 3)")
    parser.add_argument("--max-attempts", type=int, default=3, help="code attempts per task")
    parser.add_argument("--max-tokens", type=int, default=48,
                        help="cap on every phase's generated tokens (default: 48)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("kv-bench.json"), help="JSON report")
    parser.add_argument(
        "--events-dir", type=Path, default=None, help="event logs go here (default: temporary)"
    )


def main(args: argparse.Namespace) -> int:
    """Retry-phase prefill with the KV prefix cache off and on (real default profile)."""
    report = anyio.run(_run, args)
    _print(report)
    args.out.write_bytes(msgspec.json.format(msgspec.json.encode(report)))
    print(f"wrote {args.out}")
    return 0


def capped(profile: Profile, max_tokens: int) -> Profile:
    """``profile`` with every phase's ``max_tokens`` capped."""
    phases = {
        name: msgspec.structs.replace(cfg, max_tokens=min(cfg.max_tokens, max_tokens))
        for name, cfg in profile.phases.items()
    }
    return msgspec.structs.replace(profile, phases=phases)


async def _run(args: argparse.Namespace) -> KVReport:
    profile = capped(resolve_profile(args.profile), args.max_tokens)
    tasks = load_suite(args.suite, limit=args.tasks)
    records: dict[str, list[PhaseRecord]] = {c: [] for c in CONDITIONS}
    walls = dict.fromkeys(CONDITIONS, 0.0)
    with contextlib.ExitStack() as dirs:
        tmp = Path(dirs.enter_context(tempfile.TemporaryDirectory(prefix="swapos-kv-")))
        logs = args.events_dir or tmp
        logs.mkdir(parents=True, exist_ok=True)
        async with contextlib.AsyncExitStack() as stack:
            systems: dict[str, System] = {}
            for cond in CONDITIONS:
                systems[cond] = await stack.enter_async_context(
                    open_system(
                        profile,
                        kv_cache=cond != "off",
                        kv_disk_dir=tmp / f"kv-{cond}" if cond != "off" else None,
                        budget_bytes=ONE_MODEL_BUDGET if cond == "on-evict" else None,
                        event_log=logs / f"kv-{cond}.jsonl",
                    )
                )
            for task in tasks:
                for cond in CONDITIONS:
                    start = time.perf_counter()
                    out = await systems[cond].run_task(task, max_attempts=args.max_attempts)
                    walls[cond] += time.perf_counter() - start
                    records[cond].extend(out.result.phases)
                    print(f"{task.task_id} [{cond}] iterations={out.result.iterations} "
                          f"passed={out.result.passed}", flush=True)  # fmt: skip
            stats = {c: msgspec.to_builtins(s.statistics()["kvcache"]) for c, s in systems.items()}
        conditions = [
            ConditionReport(
                condition=c,
                budget_bytes=systems[c].budget_bytes,
                wall_s=round(walls[c], 2),
                groups={g: _group([p for p in records[c] if f(p)]) for g, f in GROUPS.items()},
                kv_statistics=stats[c],
                event_log=str(logs / f"kv-{c}.jsonl") if args.events_dir else "(temporary)",
            )
            for c in CONDITIONS
        ]
    return KVReport(
        host=host_info(),
        command=_command(args),
        tasks=[t.task_id for t in tasks],
        max_attempts=args.max_attempts,
        max_tokens=args.max_tokens,
        conditions=conditions,
        targets=_targets(conditions),
    )


def _group(phases: list[PhaseRecord]) -> GroupStats:
    servable, served = kv_served(phases)
    return GroupStats(
        phases=len(phases),
        prompt_tokens=sum(p.prompt_tokens for p in phases),
        prefill_tokens=sum(p.prefill_tokens for p in phases),
        prefill_s=round(sum(p.prefill_s for p in phases), 3),
        kv_restored_tokens=sum(p.kv_restored_tokens for p in phases),
        kv_servable_tokens=servable,
        kv_served_share=round(served / servable, 4) if servable else 0.0,
        restore_hits=sum(1 for p in phases if p.kv_restored_tokens > 0),
        mean_ttft_s=round(sum(p.ttft_s for p in phases) / len(phases), 3) if phases else 0.0,
        reloaded=sum(1 for p in phases if p.load_s + p.load_hidden_s > RELOAD_MIN_S),
    )


def _targets(conditions: list[ConditionReport]) -> list[TargetCheck]:
    off = next(c for c in conditions if c.condition == "off")
    checks = []
    for cond in conditions:
        if cond.condition == "off":
            continue
        for group in ("retry", "repeats"):
            base, now = off.groups[group].prefill_s, cond.groups[group].prefill_s
            reduction = 1.0 - now / base if base > 0 else 0.0
            checks.append(
                TargetCheck(
                    condition=cond.condition,
                    group=group,
                    off_prefill_s=base,
                    on_prefill_s=now,
                    reduction=round(reduction, 4),
                    target=TARGET_REDUCTION,
                    met=reduction >= TARGET_REDUCTION,
                )
            )
    return checks


def _command(args: argparse.Namespace) -> str:
    return (
        f"python -m swapos.bench kv --suite {args.suite} --tasks {args.tasks} "
        f"--max-attempts {args.max_attempts} --max-tokens {args.max_tokens} --out {args.out}"
    )


def _print(report: KVReport) -> None:
    console = Console(width=150)
    table = Table(title=f"KV prefix cache: {len(report.tasks)} tasks, {report.command}")
    for col in ("condition", "phases", "n", "prefill tok", "prefill s", "restored tok",
                "servable tok", "served", "hits", "ttft s", "reloaded"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("condition", "phases") else "right")
    for cond in report.conditions:
        for group, g in cond.groups.items():
            table.add_row(
                cond.condition, group, str(g.phases), str(g.prefill_tokens), f"{g.prefill_s:.2f}",
                str(g.kv_restored_tokens), str(g.kv_servable_tokens), f"{g.kv_served_share:.0%}",
                str(g.restore_hits), f"{g.mean_ttft_s:.2f}",
                str(g.reloaded),
            )  # fmt: skip
        table.add_section()
    console.print(table)
    for t in report.targets:
        verdict = "MET" if t.met else "MISSED"
        console.print(
            f"{verdict}: {t.condition} {t.group}: prefill {t.off_prefill_s:.2f}s -> "
            f"{t.on_prefill_s:.2f}s, reduction {t.reduction:.1%} (target {t.target:.0%})"
        )
