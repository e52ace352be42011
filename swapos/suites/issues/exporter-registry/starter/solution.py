"""Export a list of flat records in a few text formats."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

Row = dict[str, Any]


def _columns(rows: list[Row]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    return columns


def export(rows: list[Row], fmt: str) -> str:
    """``rows`` as text in format ``fmt`` (see :func:`supported_formats`)."""
    fmt = fmt.lower()
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=_columns(rows), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buf.getvalue()
    elif fmt == "json":
        return json.dumps(rows, indent=2, sort_keys=True) + "\n"
    elif fmt == "markdown":
        columns = _columns(rows)
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        for row in rows:
            lines.append("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
        return "\n".join(lines) + "\n"
    else:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(supported_formats())}")


def supported_formats() -> list[str]:
    return ["csv", "json", "markdown"]
