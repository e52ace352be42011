"""The timeline picture of an HTML report: inline SVG of the bars of
:mod:`swapos.records.timeline` (the fold the live page draws), one lane per model.

Each lane has a residency strip (loads split into paid and hidden, evictions, KV restores)
above a request strip (one bar per phase that used the model); bars that overlap take
rows of their own. Every bar has a tooltip (``<title>``) with its numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from swapos.bench.html_page import esc
from swapos.messages.events import AnyEvent
from swapos.records.timeline import RESIDENCY_KINDS, Bar, lanes, pack, timeline

COLORS = {
    "paid": "#d1495b",
    "hidden": "#2a9d8f",
    "load": "#8d99ae",
    "loading": "#e9a13b",
    "evict": "#6d4c41",
    "kv": "#7b2cbf",
    "failed": "#222222",
    "request": "#457b9d",
}
KINDS = {
    "paid": "paid load (a phase waited)",
    "hidden": "hidden load (prefetched)",
    "load": "load no phase waited for",
    "evict": "eviction",
    "kv": "KV prefix restored",
    "failed": "failed or cancelled",
    "request": "phase (request)",
}
WIDTH, LEFT, RIGHT, ROW = 1200, 150, 12, 14


def timeline_svg(events: Sequence[AnyEvent]) -> str:
    """The SVG picture of ``events`` (an event log), or a note when it has no bars."""
    bars = list(timeline(events).bars.values())
    if not bars:
        return '<p class="muted">No loads, evictions or phases in this event log.</p>'
    end = max(*(b.end if b.end is not None else b.start for b in bars), events[-1].t, 1e-9)
    scale = (WIDTH - LEFT - RIGHT) / end

    def x(t: float) -> float:
        return LEFT + t * scale

    out: list[str] = []
    y = 4.0
    for i, lane in enumerate(lanes(bars)):
        mine = [b for b in bars if b.lane == lane]
        res = pack([b for b in mine if b.kind in RESIDENCY_KINDS], end)
        req = pack([b for b in mine if b.kind not in RESIDENCY_KINDS], end)
        res_rows = max((r + 1 for _, r in res), default=1)
        req_rows = max((r + 1 for _, r in req), default=1)
        height = (res_rows + req_rows) * ROW + 4
        fill = "#f5f7fa" if i % 2 == 0 else "#ffffff"
        out.append(f'<g class="lane" data-lane="{esc(lane)}">')
        out.append(f'<rect x="0" y="{y:.1f}" width="{WIDTH}" height="{height}" fill="{fill}"/>')
        out.append(
            f'<text x="4" y="{y + 12:.1f}">{esc(_short(lane))}<title>{esc(lane)}</title></text>'
        )
        out += [_bar(b, x, y + row * ROW, end) for b, row in res]
        out += [_bar(b, x, y + (res_rows + row) * ROW, end) for b, row in req]
        out.append("</g>")
        y += height + 2
    out += _axis(x, end, y)
    total = y + 18
    svg = (
        f'<svg class="timeline" viewBox="0 0 {WIDTH} {total:.0f}" role="img" aria-label="timeline">'
    )
    return svg + "".join(out) + "</svg>" + _legend()


def _short(lane: str) -> str:
    return lane if len(lane) <= 22 else lane[:21] + "…"


def _bar(bar: Bar, x: Callable[[float], float], y: float, end: float) -> str:
    stop = bar.end if bar.end is not None else end
    color = COLORS.get(bar.kind, "#999999")
    tip = esc(_tooltip(bar))
    attrs = f'class="bar" data-kind="{esc(bar.kind)}" data-lane="{esc(bar.lane)}"'
    if bar.kind == "kv":
        cx = x(bar.start)
        d = f"M{cx - 5:.1f},{y:.1f} L{cx + 5:.1f},{y:.1f} L{cx:.1f},{y + ROW - 2:.1f} Z"
        return f'<path {attrs} d="{d}" fill="{color}"><title>{tip}</title></path>'
    width = max(x(stop) - x(bar.start), 4.0 if bar.kind == "evict" else 1.5)
    return (
        f'<rect {attrs} x="{x(bar.start):.1f}" y="{y:.1f}" width="{width:.1f}" '
        f'height="{ROW - 2}" rx="2" fill="{color}"><title>{tip}</title></rect>'
    )


def _tooltip(bar: Bar) -> str:
    text = f"{KINDS.get(bar.kind, bar.kind)}: {bar.label}" if bar.label else bar.kind
    if bar.end is None:
        text += f" · {bar.start:.2f} s → (unfinished)"
    elif bar.kind == "kv":
        text += f" · at {bar.start:.2f} s"
    else:
        text += f" · {bar.start:.2f} → {bar.end:.2f} s ({bar.end - bar.start:.2f} s)"
    if bar.tokens:
        text += f" · {bar.tokens} tokens"
    if bar.tok_s:
        text += f" · {bar.tok_s:.1f} tok/s"
    return text + (f" · {bar.outcome}" if bar.outcome else "")


def _axis(x: Callable[[float], float], end: float, y: float) -> list[str]:
    out = []
    for i in range(6):
        t = end * i / 5
        out.append(
            f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="0" y2="{y:.1f}" stroke="#ccc" '
            'stroke-dasharray="2,3"/>'
        )
        anchor = "end" if i == 5 else "start"
        out.append(f'<text x="{x(t):.1f}" y="{y + 12:.1f}" text-anchor="{anchor}">{t:.1f} s</text>')
    return out


def _legend() -> str:
    items = "".join(
        f'<span><span class="swatch" style="background:{COLORS[k]}"></span>{esc(text)}</span>'
        for k, text in KINDS.items()
    )
    return f'<p class="legend">{items}</p>'
