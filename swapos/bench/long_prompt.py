"""Long-prompt bench: one model served under a budget with a prompt of N tokens (issue 54).

``swapos serve`` runs one profile model (``--model``, the 1.5B by default; its context cap
the profile's, its start 4096) under ``--budget`` with its own KV disk tier. The same chat,
a file of ``--tokens`` tokens and a question about it, is asked three times:

1. ``cold``: the model loads at its start context, grows to what the prompt needs (a
   reload), and prefills the whole prompt;
2. ``warm``: the same request again, its prefix restored from the KV cache's RAM tier;
3. ``restart``: after the server is stopped and started again (its RAM tier empty), the
   same request, its prefix restored from the disk tier (its answer the same as warm's).

Each server's peak RSS (``VmHWM`` of its process, read before it stops) is compared with the
budget: the budget is the process's (its overhead, the models and the KV RAM tier,
docs/timings.md). Results: ``<results>/<name>-<date>/long-prompt.json`` and ``.md``, the
servers' logs and event logs.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import msgspec
from rich.console import Console

from swapos.bench.serve import servers
from swapos.errors import SwapOSError
from swapos.models.bundled import resolve_profile
from swapos.models.profile import parse_size
from swapos.models.resolve import model_specs
from swapos.models.spec import ModelSpec
from swapos.sysinfo import host_info, status_bytes

Say = Callable[[str], None]
QUESTION = "Which function in this file would you test first, and why? One sentence."


class Ask(msgspec.Struct, frozen=True, kw_only=True):
    """One request and what the server reported for it."""

    name: str
    wall_s: float
    prompt_tokens: int
    kv_restored_tokens: int
    prefill_tokens: int
    load_s: float
    ttft_s: float
    answer: str


class Server(msgspec.Struct, frozen=True, kw_only=True):
    """One server process: its requests and its peak RSS."""

    asks: list[Ask]
    peak_rss_bytes: int


class LongPromptReport(msgspec.Struct, frozen=True, kw_only=True):
    host: dict[str, str]
    command: str
    run_at: str
    profile: str
    model: str
    path: str
    target_tokens: int
    budget_bytes: int
    servers: list[Server]
    checks: dict[str, bool]


def source_file(lines: int) -> str:
    """A Python file of ``lines`` functions, no two alike (so nothing in it repeats)."""
    out = []
    for i in range(lines):
        out.append(
            f"def step_{i}(values, scale={i % 7 + 1}):\n"
            f'    """Scale the values by {i % 7 + 1} and drop those under {i % 13}."""\n'
            f"    return [v * scale for v in values if v >= {i % 13}]\n"
        )
    return "\n".join(out)


def sized_file(count: Callable[[str], int], tokens: int) -> str:
    """The longest :func:`source_file` whose chat prompt stays within ``tokens`` tokens."""
    lo, hi = 1, max(2, tokens // 10)
    while count(source_file(hi)) < tokens:
        hi *= 2
    while lo < hi:  # the largest n with count(n) <= tokens
        mid = (lo + hi + 1) // 2
        if count(source_file(mid)) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return source_file(lo)


def restored_answers_agree(asks: list[Ask]) -> bool:
    """Whether the greedy answers decoded from the restored state agree (warm, restart). The
    cold answer may differ after a near-tie: a full prefill writes the prompt's cells in
    batches, a restore evaluates the last prompt token alone, and the two round differently
    (docs/results/log/2026-12-06-batch-numerics.md)."""
    return len({a.answer for a in asks if a.kv_restored_tokens}) == 1


def messages(file: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You review Python code briefly."},
        {"role": "user", "content": f"```python\n{file}\n```\n\n{QUESTION}"},
    ]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--profile", default="default", help="builtin profile or TOML (default: default)")
    add("--model", default="large", help="the profile's model (default: large, the 1.5B)")
    add("--tokens", type=int, default=16384, help="the prompt's tokens (default 16384)")
    add("--budget", default="3GiB", help="the server's memory budget (default 3GiB)")
    add("--max-tokens", type=int, default=24, help="max_tokens of each answer (default 24)")
    add("--name", default="long-prompt", help="results folder name, before the date")
    add("--results", type=Path, default=Path("out"), help="where results go (default: out)")


def main(args: argparse.Namespace) -> int:
    """Long-prompt bench: a prompt of N tokens on one model under a budget: peak RSS, the KV
    cache's restore, and its restore from disk after a restart."""
    console = Console(width=None if sys.stdout.isatty() else 150)
    out_dir = args.results / f"{args.name}-{datetime.date.today().isoformat()}"
    report = anyio.run(lambda: run_bench(args, out_dir, say=console.print))
    path = out_dir / "long-prompt.json"
    path.write_bytes(msgspec.json.format(msgspec.json.encode(report)))
    (out_dir / "long-prompt.md").write_text(markdown(report))
    console.print(markdown(report))
    console.print(f"wrote {path}")
    return 0 if all(report.checks.values()) else 1


async def run_bench(
    args: argparse.Namespace, out_dir: Path, *, say: Say = print
) -> LongPromptReport:
    from swapos.backends.llama import LlamaBackend

    profile = resolve_profile(args.profile)
    specs = await anyio.to_thread.run_sync(model_specs, profile)
    if args.model not in specs:
        raise SwapOSError(f"--model {args.model}: not in profile {profile.name!r} ({list(specs)})")
    spec = specs[args.model]
    budget = parse_size(args.budget, field="--budget")
    counter = await anyio.to_thread.run_sync(LlamaBackend().token_counter, spec)
    file = await anyio.to_thread.run_sync(sized_file, lambda f: counter(f + QUESTION), args.tokens)
    body = {"model": args.model, "messages": messages(file), "max_tokens": args.max_tokens,
            "temperature": 0}  # fmt: skip
    await anyio.Path(out_dir).mkdir(parents=True, exist_ok=True)
    setup = _Setup(
        profile=args.profile, spec=spec, budget=budget, kv_dir=out_dir / "kv", out_dir=out_dir,
        body=body, mode=profile.mode,
    )  # fmt: skip
    served = [
        await _serve(setup, run, names, say)
        for run, names in enumerate((["cold", "warm"], ["restart"]), start=1)
    ]
    asks = [a for s in served for a in s.asks]
    restored = {a.name: a.kv_restored_tokens for a in asks}
    checks = {
        "the prompt reached the target": asks[0].prompt_tokens >= 0.95 * args.tokens,
        "peak RSS within the budget": all(s.peak_rss_bytes <= budget for s in served),
        "warm: prefix from the KV cache": restored["warm"] >= 0.9 * asks[0].prompt_tokens,
        "restart: prefix from the disk tier": restored["restart"] >= 0.9 * asks[0].prompt_tokens,
        "restart: the answer warm gave (one saved state)": restored_answers_agree(asks),
    }
    return LongPromptReport(
        host=host_info(), command=" ".join(["python -m swapos.bench long-prompt", *sys.argv[2:]]),
        run_at=datetime.datetime.now().isoformat(timespec="seconds"), profile=profile.name,
        model=args.model, path=spec.path, target_tokens=args.tokens, budget_bytes=budget,
        servers=served, checks=checks,
    )  # fmt: skip


@dataclass(frozen=True)
class _Setup:
    """What every server of a run shares."""

    profile: str
    spec: ModelSpec
    budget: int
    kv_dir: Path
    out_dir: Path
    body: dict[str, object]
    mode: str


async def _serve(setup: _Setup, run: int, names: list[str], say: Say) -> Server:
    """A server of ``setup`` (the ``run``-th), asked the chat once per name; its peak RSS."""
    port = servers.free_port()
    out_dir = setup.out_dir
    launch = servers.swapos_launch(
        setup.profile, port, mode=setup.mode, budget=setup.budget,
        event_log=out_dir / f"events-{run}.jsonl", log=out_dir / f"server-{run}.log",
        extra=["--kv-dir", str(setup.kv_dir)],
    )  # fmt: skip
    asks: list[Ask] = []
    async with servers.started([launch]) as (_, procs), httpx.AsyncClient(timeout=3600) as client:
        for name in names:
            t0 = time.perf_counter()
            r = await client.post(f"{servers.base_url(port)}/chat/completions", json=setup.body)
            if r.status_code != 200:
                raise SwapOSError(f"{name}: {r.status_code} {r.text[:300]}")
            data = r.json()
            timings = data["swapos"]
            ask = Ask(
                name=name, wall_s=time.perf_counter() - t0,
                prompt_tokens=data["usage"]["prompt_tokens"],
                kv_restored_tokens=timings["kv_restored_tokens"],
                prefill_tokens=timings["prefill_tokens"], load_s=timings["load_s"],
                ttft_s=timings["ttft_s"], answer=data["choices"][0]["message"]["content"],
            )  # fmt: skip
            say(f"{setup.spec.name} {name}: {ask.prompt_tokens} prompt tokens, "
                f"{ask.kv_restored_tokens} restored, {ask.wall_s:.1f}s")  # fmt: skip
            asks.append(ask)
        peak = _peak_rss(procs[0].pid)
    return Server(asks=asks, peak_rss_bytes=peak)


def _peak_rss(pid: int) -> int:
    """``VmHWM`` of process ``pid``, bytes."""
    return status_bytes(Path(f"/proc/{pid}/status").read_text(), "VmHWM")


def markdown(report: LongPromptReport) -> str:
    """The report as a table of the requests and the checks."""
    mib = 1 << 20
    lines = [
        f"Long prompt: {report.model} ({report.path}), target {report.target_tokens} tokens, "
        f"budget {report.budget_bytes / mib:.0f} MiB; {report.host.get('cpu', '')}",
        "",
        "| request | prompt tokens | restored | prefilled | load s | ttft s | wall s "
        "| server peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for server in report.servers:
        for a in server.asks:
            lines.append(
                f"| {a.name} | {a.prompt_tokens} | {a.kv_restored_tokens} | {a.prefill_tokens} "
                f"| {a.load_s:.2f} | {a.ttft_s:.2f} | {a.wall_s:.1f} "
                f"| {server.peak_rss_bytes / mib:.0f} |"
            )
    lines += ["", *(f"- {'met' if ok else 'MISSED'}: {name}" for name, ok in report.checks.items())]
    return "\n".join(lines) + "\n"
