"""A tiny CSV row splitter (one line, no embedded newlines)."""

from __future__ import annotations

DELIMITER = ","
QUOTE = '"'


def split_row(line: str, delimiter: str = DELIMITER) -> list[str]:
    """Split one CSV line into its fields.

    Fields may be quoted with double quotes; a quoted field may contain the delimiter.
    """
    fields: list[str] = []
    current: list[str] = []
    in_quotes = False
    for ch in line:
        if in_quotes:
            if ch == QUOTE:
                in_quotes = False
            else:
                current.append(ch)
        elif ch == QUOTE:
            in_quotes = True
        elif ch == delimiter:
            fields.append("".join(current))
            current = []
        else:
            current.append(ch)
    fields.append("".join(current))
    return fields


def join_row(fields: list[str], delimiter: str = DELIMITER) -> str:
    """The inverse of :func:`split_row`: quote a field only when it needs it."""
    out = []
    for field in fields:
        if delimiter in field or QUOTE in field:
            field = QUOTE + field.replace(QUOTE, QUOTE * 2) + QUOTE
        out.append(field)
    return delimiter.join(out)


def read_rows(text: str, delimiter: str = DELIMITER) -> list[list[str]]:
    """Every non-empty line of ``text`` split into fields."""
    return [split_row(line, delimiter) for line in text.splitlines() if line.strip()]
