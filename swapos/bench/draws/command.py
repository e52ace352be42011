"""The draws bench: a prompt's sampled draws decoded in turn and side by side.

``python -m swapos.bench draws [--profile P] [--model small] [--suite humaneval|builtin]
[--prompts 3] [--draws 6] [--max-tokens N] [--temperature T] [--rounds 1]
[--curve 2:3.12,4:3.79,6:4.14] [--out draws-bench.json]``

The prompts are the pipeline's own: the ``code`` phase's first prompt of every
``len(suite) // prompts``-th task of the suite, rendered for ``--model`` as the conductor
renders it, and the draws sample as the conductor's draws do (``resample_temperature``, the
recorded seeds of :func:`~swapos.pipeline.identity.resample_seed`, the phase's stops and
``max_tokens``). The model is loaded once; each prompt is first answered greedily for one
token with its state saved (in the pipeline the first attempt left it in the KV cache), then
its draws run both ways from that state, interleaved (the way that runs first alternates by
prompt and round, so machine drift cancels). Reported: the walls, their ratio against issue
26's target (<= 0.75), tokens/s both ways, the share of draws whose text is the same both
ways, and with ``--curve`` what the draws policy would choose and the ratio it predicts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.to_thread
import msgspec
from rich.console import Console
from rich.table import Table

from swapos.backends.llama import LlamaBackend, LlamaModel
from swapos.bench.draws.measure import DrawsSummary, PromptRun, measure_prompt, summarize
from swapos.data.sampling import SamplingParams
from swapos.data.task import Task
from swapos.errors import SwapOSError
from swapos.models.bundled import resolve_profile
from swapos.models.profile import Profile
from swapos.models.resolve import model_specs
from swapos.models.spec import ModelSpec
from swapos.passes import passes_named
from swapos.pipeline.chat_prompts import build_chat_prompt
from swapos.pipeline.humaneval import load_humaneval
from swapos.pipeline.prompts import build_prompt, capsule_for_task
from swapos.pipeline.tasks import builtin_suite_path, discover_tasks
from swapos.policies.draws import DrawPlan, plan_draws
from swapos.policies.retry import resample_seed
from swapos.sysinfo import host_info

Say = Callable[[str], None]


class DrawsReport(msgspec.Struct, frozen=True, kw_only=True):
    host: dict[str, str]
    command: str
    profile: str
    model: str
    draws: int
    max_tokens: int
    temperature: float
    rounds: int
    load_avg_start: list[float]
    load_avg_end: list[float]
    runs: list[PromptRun]
    summary: DrawsSummary
    curve: dict[int, float] | None = None
    plan: DrawPlan | None = None
    predicted_ratio: float | None = None


def _curve(text: str) -> dict[int, float]:
    try:
        pairs = [item.split(":") for item in text.split(",") if item.strip()]
        curve = {int(k): float(v) for k, v in pairs}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected K:COST,K:COST... (got {text!r})") from None
    if not curve or min(curve) < 2 or min(curve.values()) <= 0:
        raise argparse.ArgumentTypeError(f"sizes must be >= 2, costs > 0 (got {text!r})")
    return curve


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--profile", default=None, help="profile TOML or builtin name (default: the default)")
    add("--model", default="small", help="the profile's model to draw with (default: small)")
    add("--suite", choices=("humaneval", "builtin"), default="humaneval",
        help="where the prompts come from (default: humaneval)")  # fmt: skip
    add("--prompts", type=int, default=3, help="prompts, spread over the suite (default: 3)")
    add("--draws", type=int, default=6, help="draws per prompt (default: 6)")
    add("--max-tokens", type=int, default=None,
        help="tokens per draw (default: the code phase's max_tokens)")  # fmt: skip
    add("--temperature", type=float, default=None,
        help="sampling temperature (default: the profile's resample_temperature)")  # fmt: skip
    add("--rounds", type=int, default=1, help="rounds over the prompts (default: 1)")
    add("--curve", type=_curve, default=None, metavar="K:COST,...",
        help="a measured batch cost curve (bench decode): show the policy's choice")  # fmt: skip
    add("--out", type=Path, default=Path("draws-bench.json"), help="JSON report")


def main(args: argparse.Namespace) -> int:
    """Draws bench: a prompt's sampled draws in turn and side by side, wall ratio."""
    profile = resolve_profile(args.profile)
    specs = model_specs(profile)
    if args.model not in specs:
        raise SwapOSError(f"profile has no model {args.model!r}; choose from {', '.join(specs)}")
    console = Console(width=None if sys.stdout.isatty() else 150)
    report = anyio.run(lambda: run_bench(profile, specs[args.model], args, say=console.print))
    print_report(report, console)
    args.out.write_bytes(msgspec.json.format(msgspec.json.encode(report)))
    console.print(f"wrote {args.out}")
    return 0


def pick_tasks(suite: str, count: int) -> list[Task]:
    """``count`` tasks spread evenly over ``suite`` (every ``len // count``-th)."""
    tasks = load_humaneval() if suite == "humaneval" else discover_tasks(builtin_suite_path())
    step = max(len(tasks) // max(count, 1), 1)
    return tasks[::step][:count]


def draw_params(
    profile: Profile, task: Task, stop: tuple[str, ...], args: argparse.Namespace
) -> list[SamplingParams]:
    """The draws of ``task``'s first attempt, sampled as the conductor samples them."""
    cfg = profile.phase("code")
    temperature = _temperature(profile, args)
    return [
        SamplingParams(
            max_tokens=args.max_tokens or cfg.max_tokens,
            stop=stop + tuple(cfg.stop),
            temperature=temperature,
            seed=resample_seed(f"{task.task_id}:draw", 1, i),
        )
        for i in range(1, args.draws + 1)
    ]


async def run_bench(
    profile: Profile, spec: ModelSpec, args: argparse.Namespace, *, say: Say = print
) -> DrawsReport:
    """Load ``spec``, run every prompt's draws both ways for ``--rounds`` rounds; progress
    lines go to ``say``."""
    out = say
    load_start = list(os.getloadavg())
    backend = LlamaBackend()
    fmt = await anyio.to_thread.run_sync(backend.chat_format, spec)
    counter = await anyio.to_thread.run_sync(backend.token_counter, spec)
    cfg = profile.phase("code")
    budget = min(cfg.prompt_budget_tokens, spec.n_ctx - cfg.max_tokens - 8)
    tasks = pick_tasks(args.suite, args.prompts)
    passes = passes_named(profile.pipeline.passes)
    model: LlamaModel = await backend.load(spec)
    runs: list[PromptRun] = []
    try:
        for rnd in range(args.rounds):
            for n, task in enumerate(tasks):
                capsule = capsule_for_task(task)
                prompt = (
                    build_chat_prompt(
                        "code",
                        task,
                        capsule,
                        counter,
                        budget,
                        fmt,
                        opening=passes.brief(task).opening,
                    )
                    if fmt is not None
                    else build_prompt("code", task, capsule, counter, budget)
                )
                tokens = await model.tokenize(prompt.text, special=prompt.chat)
                first = await model.generate(
                    tokens, SamplingParams(max_tokens=1), save_at=len(tokens)
                )
                run = await measure_prompt(
                    model, task.task_id, tokens, draw_params(profile, task, prompt.stop, args),
                    restore=first.saved, round_=rnd, side_first=(rnd + n) % 2 == 1,
                    now=time.perf_counter,
                )  # fmt: skip
                runs.append(run)
                same = sum(d.same_text for d in run.draws)
                out(
                    f"round {rnd + 1}/{args.rounds} {task.task_id} ({len(tokens)} prompt tokens, "
                    f"{run.first} first): in turn {run.turn_s:.2f}s, side by side "
                    f"{run.side_s:.2f}s (x{run.side_s / run.turn_s:.2f}); same text "
                    f"{same}/{len(run.draws)}"
                )
    finally:
        await model.close()
    plan = plan_draws(args.draws, args.curve) if args.curve else None
    return DrawsReport(
        host=host_info(),
        command=_command(args),
        profile=profile.name,
        model=spec.name,
        draws=args.draws,
        max_tokens=args.max_tokens or cfg.max_tokens,
        temperature=_temperature(profile, args),
        rounds=args.rounds,
        load_avg_start=load_start,
        load_avg_end=list(os.getloadavg()),
        runs=runs,
        summary=summarize(runs, draws=args.draws),
        curve=args.curve,
        plan=plan,
        predicted_ratio=plan.expected_cost / plan.in_turn_cost if plan is not None else None,
    )


def print_report(report: DrawsReport, console: Console) -> None:
    """The runs as a table, then the totals and the target."""
    table = Table(title=f"draws: {report.draws} of {report.model}, {report.max_tokens} tokens max")
    for col in ("task", "round", "first", "prompt", "in turn s", "side s", "ratio", "same"):
        table.add_column(col, justify="right" if col not in ("task", "first") else "left")
    for r in report.runs:
        table.add_row(
            r.task_id, str(r.round + 1), r.first, str(r.prompt_tokens), f"{r.turn_s:.2f}",
            f"{r.side_s:.2f}", f"{r.side_s / r.turn_s:.2f}" if r.turn_s else "-",
            f"{sum(d.same_text for d in r.draws)}/{len(r.draws)}",
        )  # fmt: skip
    console.print(table)
    s = report.summary
    console.print(
        f"in turn {s.turn_s:.2f}s ({s.turn_tok_s:.1f} tok/s), side by side {s.side_s:.2f}s "
        f"({s.side_tok_s:.1f} tok/s): x{s.ratio:.3f}; same text {s.same_text_share:.0%}"
    )
    if report.plan is not None:
        console.print(
            f"policy on --curve: {report.plan.reason} (predicts x{report.predicted_ratio:.3f})"
        )
    for t in s.targets:
        console.print(f"target {t.name}: {t.value:.3f} <= {t.limit} {'met' if t.met else 'MISSED'}")


def _temperature(profile: Profile, args: argparse.Namespace) -> float:
    t: float | None = args.temperature
    return profile.pipeline.resample_temperature if t is None else t


def _command(args: argparse.Namespace) -> str:
    parts = ["python -m swapos.bench draws", f"--model {args.model} --suite {args.suite}",
             f"--prompts {args.prompts} --draws {args.draws} --rounds {args.rounds}"]  # fmt: skip
    if args.profile:
        parts.append(f"--profile {args.profile}")
    if args.max_tokens:
        parts.append(f"--max-tokens {args.max_tokens}")
    if args.temperature is not None:
        parts.append(f"--temperature {args.temperature}")
    if args.curve:
        parts.append("--curve " + ",".join(f"{k}:{v}" for k, v in sorted(args.curve.items())))
    return " ".join([*parts, f"--out {args.out}"])
