"""Rendering helpers for the ``report`` command."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def format_cell(value: Any) -> str:
    """One cell's text: floats with two decimals, ``None`` empty, the rest ``str()``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def is_numeric(values: Sequence[Any]) -> bool:
    """Whether every value that is not ``None`` is an int or a float (bools are not)."""
    present = [v for v in values if v is not None]
    return bool(present) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in present
    )


def format_record(record: dict[str, Any]) -> str:
    """``key: value`` lines of one record, keys padded to the longest."""
    if not record:
        return ""
    width = max(len(k) for k in record)
    return "\n".join(f"{k.ljust(width)}: {format_cell(v)}" for k, v in record.items())


def format_table(
    rows: Sequence[Sequence[Any]], headers: Sequence[str], align: str | None = None
) -> str:
    """An aligned plain-text table of ``rows`` under ``headers``."""
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row {list(row)!r} has {len(row)} cells, not {len(headers)}")
    columns = [[row[i] for row in rows] for i in range(len(headers))]
    if align is None:
        align = "".join("r" if is_numeric(col) else "l" for col in columns)
    cells = [[format_cell(v) for v in row] for row in rows]
    widths = [
        max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)
    ]

    def line(texts: Sequence[str]) -> str:
        parts = [
            t.rjust(w) if a == "r" else t.ljust(w) for t, w, a in zip(texts, widths, align)
        ]
        return "  ".join(parts).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)
