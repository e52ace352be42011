"""The slot soak's figures and verdicts, as pure functions of what was measured.

* :func:`counts`: requests by result, latency percentiles of the completed ones, tokens/s;
* :func:`rss_check`: the server's RSS after warm-up against its end (flat: grown by no more
  than :data:`RSS_TOLERANCE_BYTES` or :data:`RSS_TOLERANCE_SHARE`, the larger), also less the
  KV cache's RAM tier, which fills by design until its budget is reached;
* :func:`idle_problems`: what ``GET /running`` shows still busy after the clients stopped;
* :func:`audit_log`: the server's event log against the clients' records: every task
  finished once, answered at most once, every completed request found with its tokens.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec

from swapos.bench.serve.stats import percentile
from swapos.bench.soak_slots.plan import Kind
from swapos.messages.events import AnyEvent, GenerationFinished, TaskFinished, TaskStarted
from swapos.sysinfo import status_bytes

MIB = 2**20
RSS_TOLERANCE_BYTES = 32 * MIB
RSS_TOLERANCE_SHARE = 0.05
Result = Literal["completed", "disconnected", "cancelled", "error"]


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """One request as its client saw it (``start_s``: since the soak started)."""

    request_id: str
    client: int
    action: Kind
    result: Result
    start_s: float
    latency_s: float
    response_id: str | None = None
    chunks: int = 0
    tokens: int = 0
    error: str | None = None


class Counts(msgspec.Struct, frozen=True, kw_only=True):
    sent: int
    completed: int
    disconnected: int
    cancelled: int
    errors: int
    planned_disconnects: int
    planned_cancels: int
    p50_s: float
    p99_s: float
    tokens: int
    tokens_per_s: float
    """Completed requests' tokens over the soak's wall (disconnected ones' left out)."""
    first_errors: list[str]


def counts(outcomes: Sequence[Outcome], wall_s: float) -> Counts:
    """The requests by result, and the completed ones' latency and tokens."""
    by = Counter(o.result for o in outcomes)
    done = [o for o in outcomes if o.result == "completed"]
    latencies = [o.latency_s for o in done]
    tokens = sum(o.tokens for o in done)
    return Counts(
        sent=len(outcomes), completed=by["completed"], disconnected=by["disconnected"],
        cancelled=by["cancelled"], errors=by["error"],
        planned_disconnects=sum(o.action == "disconnect" for o in outcomes),
        planned_cancels=sum(o.action == "cancel" for o in outcomes),
        p50_s=percentile(latencies, 0.5), p99_s=percentile(latencies, 0.99), tokens=tokens,
        tokens_per_s=tokens / wall_s if wall_s > 0 else 0.0,
        first_errors=[f"{o.request_id}: {o.error}" for o in outcomes if o.error][:10],
    )  # fmt: skip


class RssSample(msgspec.Struct, frozen=True, kw_only=True):
    """The server process at ``t_s`` (since the soak started): its RSS, and the bytes its KV
    RAM tier held by then (from the event log's ``KVSaved`` and ``KVDropped``)."""

    t_s: float
    rss_bytes: int
    kv_ram_bytes: int = 0


class RssCheck(msgspec.Struct, frozen=True, kw_only=True):
    samples: int
    warmup_s: float
    enough: bool
    """A sample was taken after warm-up and another after it (else no verdict: not flat)."""
    after_warmup_bytes: int
    end_bytes: int
    max_bytes: int
    growth_bytes: int
    less_kv_growth_bytes: int
    tolerance_bytes: int
    flat: bool
    less_kv_flat: bool


def vmrss_bytes(status: str) -> int:
    """``VmRSS`` of a ``/proc/PID/status`` text, in bytes.

    Raises:
        ValueError: no ``VmRSS`` line (a process that has exited).
    """
    return status_bytes(status, "VmRSS")


def rss_check(samples: Sequence[RssSample], warmup_s: float) -> RssCheck:
    """The first sample at or after ``warmup_s`` against the last one."""
    after = [s for s in samples if s.t_s >= warmup_s]
    enough = len(after) >= 2
    base, end = (after[0], after[-1]) if after else (RssSample(t_s=0, rss_bytes=0),) * 2
    growth = end.rss_bytes - base.rss_bytes
    less_kv = growth - (end.kv_ram_bytes - base.kv_ram_bytes)
    tolerance = max(RSS_TOLERANCE_BYTES, round(RSS_TOLERANCE_SHARE * base.rss_bytes))
    return RssCheck(
        samples=len(samples), warmup_s=warmup_s, enough=enough,
        after_warmup_bytes=base.rss_bytes, end_bytes=end.rss_bytes,
        max_bytes=max((s.rss_bytes for s in samples), default=0), growth_bytes=growth,
        less_kv_growth_bytes=less_kv, tolerance_bytes=tolerance,
        flat=enough and growth <= tolerance, less_kv_flat=enough and less_kv <= tolerance,
    )  # fmt: skip


def idle_problems(running: Mapping[str, Any]) -> list[str]:
    """What ``GET /running`` shows still busy: a queue with requests waiting or running,
    a model still leased; empty when every slot is back in the pool."""
    problems = [
        f"queue {q.get('model')}: {q.get('waiting')} waiting, {q.get('running')} running"
        for q in running.get("queues", [])
        if q.get("waiting") or q.get("running")
    ]
    problems += [
        f"model {m.get('model')}: {m.get('leases')} leases"
        for m in running.get("models", [])
        if m.get("leases")
    ]
    return problems


class LogAudit(msgspec.Struct, frozen=True, kw_only=True):
    """The event log against the clients' records (lists name the ids at fault)."""

    events: int
    warnings: list[str]
    tasks: int
    unfinished: list[str]
    answered_twice: list[str]
    lost: list[str]
    token_mismatch: list[str]
    unmatched_tasks: int
    """Tasks no client read an id of: cancelled requests that reached the model, warm-ups."""
    too_many_tasks: bool

    @property
    def ok(self) -> bool:
        return (
            not (self.unfinished or self.answered_twice or self.lost or self.token_mismatch)
            and not self.too_many_tasks
        )


def audit_log(
    events: Sequence[AnyEvent],
    outcomes: Sequence[Outcome],
    *,
    extra: int,
    warnings: Sequence[str] = (),
) -> LogAudit:
    """Every task of the log started and finished once and generated at most once; no two
    requests got one response id; every completed request's task finished without error,
    with the tokens its client counted; the tasks no client saw are at most the cancelled
    and failed requests plus ``extra`` (requests sent outside the soak: the warm-up)."""
    started = Counter(e.task_id for e in events if isinstance(e, TaskStarted))
    finished = Counter(e.task_id for e in events if isinstance(e, TaskFinished))
    failed = {e.task_id for e in events if isinstance(e, TaskFinished) and e.error}
    generated = Counter(e.task_id for e in events if isinstance(e, GenerationFinished))
    tokens = {e.task_id: e.stats.tokens for e in events if isinstance(e, GenerationFinished)}
    seen = Counter(o.response_id for o in outcomes if o.response_id)
    twice = {t for t, k in (started + finished).items() if k > 2 or finished[t] > 1}
    twice |= {t for t, k in generated.items() if k > 1} | {t for t, k in seen.items() if k > 1}
    done = [o for o in outcomes if o.result == "completed"]
    lost = [o.request_id for o in done if not finished[o.response_id] or o.response_id in failed]
    unmatched = sum(1 for t in started if t not in seen)
    unseen_allowed = sum(o.result in ("cancelled", "error") for o in outcomes) + extra
    return LogAudit(
        events=len(events), warnings=list(warnings), tasks=len(started),
        unfinished=sorted(str(t) for t in started if not finished[t]),
        answered_twice=sorted(str(t) for t in twice), lost=lost,
        token_mismatch=[o.request_id for o in done if tokens.get(o.response_id) != o.tokens],
        unmatched_tasks=unmatched, too_many_tasks=unmatched > unseen_allowed,
    )  # fmt: skip
