"""``swapos ps``: a running server's ``GET /running`` as tables.

One row per model: its residency (a loading model with how far its load has gone), its
leases, footprint and queue; then one row per queued request: its model, its place in that
model's queue and how long it has waited.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

MiB = 2**20


def state_text(model: dict[str, Any]) -> str:
    """A model's state as ``swapos ps`` shows it: ``loading 45%`` while its load runs,
    ``loading (room)`` while it waits for room, else its state."""
    state = str(model.get("state", "absent"))
    if state != "loading":
        return state
    progress = model.get("load_progress")
    return "loading (room)" if progress is None else f"loading {progress:.0%}"


def print_running(console: Console, running: dict[str, Any], *, url: str) -> None:
    """The tables of ``swapos ps``: the models, then the queued requests (if any)."""
    queues = {q["model"]: q for q in running.get("queues", [])}
    table = Table(title=escape(f"{url}  mode {running.get('mode')}"), title_justify="left")
    for col in ("model", "state", "leases", "MiB", "waiting", "running", "oldest wait s", "held"):
        table.add_column(col, justify="left" if col in ("model", "state") else "right")
    models = {m["model"]: m for m in running.get("models", [])}
    for name in sorted(set(models) | set(queues)):
        m, q = models.get(name, {}), queues.get(name, {})
        table.add_row(
            escape(name),
            escape(state_text(m)),
            str(m.get("leases", 0)),
            f"{m.get('footprint_bytes', 0) / MiB:.0f}",
            str(q.get("waiting", 0)),
            str(q.get("running", 0)),
            f"{q.get('oldest_wait_s', 0.0):.1f}",
            "yes" if q.get("held") else "",
        )
    console.print(table)
    console.print(
        f"used {running.get('used_bytes', 0) / MiB:.0f} MiB of "
        f"{running.get('budget_bytes', 0) / MiB:.0f} MiB; max wait {running.get('max_wait_s')} s"
    )
    queued = [(q["model"], r) for q in queues.values() for r in q.get("requests", [])]
    if not queued:
        return
    requests = Table(title="queued requests", title_justify="left")
    for col in ("model", "position", "waited s", "request"):
        requests.add_column(col, justify="right" if col in ("position", "waited s") else "left")
    for model, r in sorted(queued, key=lambda mr: (mr[0], mr[1]["position"])):
        requests.add_row(
            escape(model), str(r["position"]), f"{r['wait_s']:.1f}", escape(str(r["id"]))
        )
    console.print(requests)
