"""One task in an HTML report: its phases with their numbers, and its capsule made
readable: what was tried (each attempt's candidate), why it failed (the grader's, the
self-check's and the critic's feedback), what passed, and every decision the pipeline made.
"""

from __future__ import annotations

from pathlib import Path

from swapos.bench.html_page import details, esc, pre, section, table, verdict
from swapos.bench.report_tables import Table, num
from swapos.capsule.schema import Capsule, CapsuleError, decode_capsule
from swapos.records.schema import TaskResult

PHASE_HEAD = [
    "phase",
    "model",
    "attempt",
    "load s",
    "hidden s",
    "evict s",
    "ttft s",
    "prefill",
    "kv restored",
    "tokens",
    "tok/s",
    "total s",
    "outcome",
]


def phase_rows(result: TaskResult) -> Table:
    """``result``'s phases, one row each (the numbers of docs/timings.md)."""
    rows = [
        [
            p.phase,
            p.model or "-",
            str(p.attempt),
            num(p.load_s, 3),
            num(p.load_hidden_s, 3),
            num(p.evict_s, 3),
            num(p.ttft_s, 3),
            str(p.prefill_tokens),
            str(p.kv_restored_tokens),
            str(p.tokens),
            num(p.tok_s, 1),
            num(p.total_s, 3),
            p.outcome + (f": {p.error}" if p.error else ""),
        ]
        for p in result.phases
    ]
    return PHASE_HEAD, rows


def read_capsule(path: Path) -> Capsule | str:
    """The capsule at ``path``, or why it cannot be shown."""
    try:
        return decode_capsule(path.read_bytes())
    except OSError as exc:
        return f"no capsule ({exc.strerror or exc})"
    except CapsuleError as exc:
        return f"the capsule cannot be read: {exc}"


def task_block(result: TaskResult, capsule: Capsule | str | None, *, open_: bool = False) -> str:
    """A collapsible block for one task: its verdict, phases and capsule."""
    summary = (
        f"{result.task_id} ({result.category or 'no category'}): "
        f"{'passed' if result.passed else 'failed'}, {result.iterations} attempt(s), "
        f"{result.tests_passed}/{result.tests_total} tests, {result.wall_clock_s:.1f} s"
    )
    parts = [table(phase_rows(result), text_columns=(12,))]
    if result.error:
        parts.append(f"<p>error: {esc(result.error)}</p>")
    if isinstance(capsule, Capsule):
        parts += capsule_parts(capsule)
    elif capsule is not None:
        parts.append(f'<p class="muted">{esc(capsule)}</p>')
    block = details(summary, *parts, css="task")
    return block.replace("<details", "<details open", 1) if open_ else block


def capsule_parts(capsule: Capsule) -> list[str]:
    """The capsule as readable sections: plan, attempts with their feedback, decisions."""
    parts: list[str] = []
    if capsule.plan_steps:
        steps = "".join(f"<li>{esc(s)}</li>" for s in capsule.plan_steps)
        parts.append(section("Plan", f"<ol>{steps}</ol>", level=4))
    attempts = sorted(
        {a.attempt for a in capsule.artifacts} | {f.attempt for f in capsule.feedback}
    )
    for n in attempts:
        parts.append(_attempt(capsule, n))
    if capsule.decisions:
        items = "".join(f"<li><b>{esc(d.phase)}</b>: {esc(d.text)}</li>" for d in capsule.decisions)
        parts.append(section("Decisions", f"<ol>{items}</ol>", level=4))
    return parts


def _attempt(capsule: Capsule, n: int) -> str:
    out = []
    for i, artifact in enumerate(a for a in capsule.artifacts if a.attempt == n):
        state = (
            "not graded" if artifact.passed is None else ("passed" if artifact.passed else "failed")
        )
        title = f"candidate {i + 1} ({artifact.phase}): {state}"
        out.append(details(title, pre(artifact.code or "(nothing extracted)")))
    for fb in (f for f in capsule.feedback if f.attempt == n):
        counts = (
            f" ({fb.tests_passed}/{fb.tests_total} tests)"
            if fb.tests_passed is not None and fb.tests_total is not None
            else ""
        )
        out.append(f"<p>{esc(fb.source)}{esc(counts)}:</p>" + pre(fb.text))
    passed = any(a.passed for a in capsule.artifacts if a.attempt == n)
    return f"<h4>Attempt {n}: {verdict(passed)}</h4>" + "".join(out)
