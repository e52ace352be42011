"""A summary of the access log for the morning e-mail."""

from __future__ import annotations

from typing import Any

Entry = tuple[str, int, float]


def parse_lines(log_text: str) -> list[Entry]:
    """``(path, status, seconds)`` of every well-formed line."""
    entries = []
    for line in log_text.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        path, status, seconds = parts
        try:
            entries.append((path, int(status), float(seconds)))
        except ValueError:
            continue
    return entries


def summarise(entries: list[Entry]) -> dict[str, Any]:
    errors = 0
    slowest = None
    per_path: dict[str, int] = {}
    for path, status, seconds in entries:
        if status >= 500:
            errors += 1
        if slowest is None or seconds > slowest[1]:
            slowest = (path, seconds)
        per_path[path] = per_path.get(path, 0) + 1
    return {"requests": len(entries), "errors": errors, "slowest": slowest, "per_path": per_path}


def render(summary: dict[str, Any]) -> str:
    per_path = summary["per_path"]
    slowest = summary["slowest"]
    lines = [f"requests: {summary['requests']}", f"errors: {summary['errors']}"]
    if slowest is None:
        lines.append("slowest: -")
    else:
        lines.append(f"slowest: {slowest[0]} ({slowest[1]:.3f}s)")
    for path in sorted(per_path, key=lambda p: (-per_path[p], p)):
        lines.append(f"  {path}: {per_path[path]}")
    return "\n".join(lines)


def build_report(log_text: str) -> str:
    """Parse ``log_text`` (``<path> <status> <seconds>`` lines) and render a summary."""
    return render(summarise(parse_lines(log_text)))
