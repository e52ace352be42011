"""The slot soak's report: what ran, the figures, the checks; as JSON and a markdown table."""

from __future__ import annotations

from typing import Any

import msgspec

from swapos.bench.soak_slots.checks import (
    MIB,
    Counts,
    LogAudit,
    Outcome,
    RssCheck,
    RssSample,
)


class SoakSlotsReport(msgspec.Struct, frozen=True, kw_only=True):
    """One soak: its settings, figures and checks (``ok``: every check passed)."""

    host: dict[str, str]
    command: str
    run_at: str
    fake: bool
    profile: str
    model: str
    model_path: str
    slots: int
    clients: int
    seconds: float
    max_tokens: int
    disconnect: float
    cancel: float
    seed: int
    setup_s: float
    wall_s: float
    counts: Counts
    rss: RssCheck
    rss_samples: list[RssSample]
    settle_s: float
    busy_after: list[str]
    """What ``GET /running`` still showed busy once the clients stopped (empty: all idle)."""
    running_after: dict[str, Any]
    log: LogAudit
    replay_error: str | None
    replayed_tasks: int
    checks: dict[str, bool]
    ok: bool
    outcomes: list[Outcome]


def checks(
    counts: Counts,
    rss: RssCheck,
    busy_after: list[str],
    log: LogAudit,
    replay_error: str | None,
) -> dict[str, bool]:
    """Every verdict of the soak, by name."""
    return {
        "no errors": counts.errors == 0,
        "counts add up": counts.sent
        == counts.completed + counts.disconnected + counts.cancelled + counts.errors,
        "every slot back in the pool": not busy_after,
        "no request lost or answered twice": log.ok,
        "event log replays": replay_error is None,
        "RSS flat after warm-up (less the KV RAM tier)": rss.less_kv_flat,
    }


def _mib(n: int) -> str:
    return f"{n / MIB:,.1f} MiB"


def rows(r: SoakSlotsReport) -> list[tuple[str, str]]:
    """The report as (figure, value) rows."""
    c, rss = r.counts, r.rss
    return [
        ("requests sent", str(c.sent)),
        ("completed", str(c.completed)),
        ("disconnected mid-stream", f"{c.disconnected} (of {c.planned_disconnects} planned)"),
        ("cancelled before a chunk", f"{c.cancelled} (of {c.planned_cancels} planned)"),
        ("errors", str(c.errors)),
        ("latency p50 / p99 (completed)", f"{c.p50_s:.2f} s / {c.p99_s:.2f} s"),
        ("tokens/s (completed)", f"{c.tokens_per_s:.1f}"),
        ("RSS after warm-up", f"{_mib(rss.after_warmup_bytes)} ({rss.warmup_s:g} s)"),
        ("RSS at end / max", f"{_mib(rss.end_bytes)} / {_mib(rss.max_bytes)}"),
        ("RSS growth (less KV RAM tier)",
         f"{_mib(rss.growth_bytes)} ({_mib(rss.less_kv_growth_bytes)}), "
         f"tolerance {_mib(rss.tolerance_bytes)}"),
        ("event log", f"{r.log.events} events, {r.log.tasks} tasks, "
         f"{r.replayed_tasks} replayed"),
        ("slots idle after",
         "; ".join(r.busy_after) if r.busy_after else f"{r.settle_s:.1f} s"),
        *((name, "yes" if ok else "NO") for name, ok in r.checks.items()),
    ]  # fmt: skip


def markdown(r: SoakSlotsReport) -> str:
    """The figures as a markdown table, with the command and the host."""
    head = (
        f"`{r.command}` ({r.run_at}, {r.host.get('cpu', '')}): {r.model} "
        f"({'fake backend' if r.fake else r.model_path}), {r.slots} slots, {r.clients} "
        f"clients, {r.seconds:g} s, max_tokens {r.max_tokens}"
    )
    lines = [head, "", "| figure | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows(r)]
    return "\n".join(lines) + "\n"
