"""A timeline picture of a run: horizontal bars per lane (needs the ``plot`` extra)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from swapos.bench.spans import lane_order, spans
from swapos.errors import SwapOSError
from swapos.messages.events import AnyEvent

COLORS = {
    "phase": "#4c72b0",
    "grade": "#8172b2",
    "prefill": "#dd8452",
    "decode": "#c44e52",
    "prefetch": "#55a868",
    "load": "#55a868",
    "lease": "#b0b0b0",
    "evict": "#937860",
}
"""Bar colour by span kind; decisions are drawn as ticks."""


def plot_timeline(events: Sequence[AnyEvent], path: str | Path) -> None:
    """Draw every lane of ``events`` as horizontal bars and save the picture at ``path``.

    Speculative loads are hatched, so a prefetch overlapping a generation stands out.

    Raises:
        SwapOSError: matplotlib is not installed.
    """
    try:
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch
    except ImportError as exc:
        raise SwapOSError(
            "plotting needs matplotlib: pip install 'swapos[plot]' (or use --trace, which "
            "needs nothing, and open the trace in Perfetto)"
        ) from exc
    all_spans = spans(events)
    lanes = lane_order(all_spans)
    fig = Figure(figsize=(12, 0.5 * len(lanes) + 1.5), layout="constrained")
    ax = fig.add_subplot()
    for y, lane in enumerate(lanes):
        for span in (s for s in all_spans if s.lane == lane):
            if span.end is None:
                ax.plot([span.start, span.start], [y - 0.4, y + 0.4], color="black", lw=0.6)
                continue
            ax.barh(
                y,
                max(span.end - span.start, 1e-9),
                left=span.start,
                height=0.7,
                color=COLORS.get(span.kind, "#999999"),
                edgecolor="black",
                linewidth=0.3,
                hatch="//" if span.args.get("speculative") else None,
                alpha=0.85,
            )
    used = sorted({s.kind for s in all_spans if s.end is not None and s.kind in COLORS})
    handles = [Patch(facecolor=COLORS[k], edgecolor="black", label=k) for k in used]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="speculative"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=len(handles))
    ax.set_yticks(range(len(lanes)), labels=lanes)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since run start")
    ax.grid(axis="x", alpha=0.3)
    fig.savefig(Path(path), dpi=120)
