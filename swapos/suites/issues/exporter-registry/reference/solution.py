"""Export a list of flat records in a few text formats."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

Row = dict[str, Any]


def _columns(rows: list[Row]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    return columns


def export_csv(rows: list[Row]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=_columns(rows), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def export_json(rows: list[Row]) -> str:
    return json.dumps(rows, indent=2, sort_keys=True) + "\n"


def export_markdown(rows: list[Row]) -> str:
    columns = _columns(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines) + "\n"


EXPORTERS: dict[str, Callable[[list[Row]], str]] = {
    "csv": export_csv,
    "json": export_json,
    "markdown": export_markdown,
}


def export(rows: list[Row], fmt: str) -> str:
    """``rows`` as text in format ``fmt`` (see :func:`supported_formats`)."""
    try:
        exporter = EXPORTERS[fmt.lower()]
    except KeyError:
        raise ValueError(
            f"unknown format {fmt.lower()!r}; choose from {', '.join(supported_formats())}"
        ) from None
    return exporter(rows)


def supported_formats() -> list[str]:
    return list(EXPORTERS)
