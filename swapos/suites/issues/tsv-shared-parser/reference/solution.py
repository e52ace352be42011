"""Loaders for the nightly TSV exports."""

from __future__ import annotations

NULL = "\\N"


def parse_record(line: str, columns: int) -> list[str | None] | None:
    """The cleaned cells of one TSV line, or None for a blank or comment line."""
    if not line.strip() or line.startswith("#"):
        return None
    cells = [c.strip() for c in line.split("\t")]
    if len(cells) != columns:
        raise ValueError(f"expected {columns} columns, got {len(cells)}")
    return [None if c == NULL else c for c in cells]


def _records(text: str, columns: int) -> list[list[str | None]]:
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        try:
            values = parse_record(line, columns)
        except ValueError as e:
            raise ValueError(f"line {lineno}: {e}") from None
        if values is not None:
            out.append(values)
    return out


def load_users(text: str) -> list[dict[str, object]]:
    """Users from ``id<TAB>name<TAB>email`` lines."""
    return [
        {"id": int(v[0] or 0), "name": v[1], "email": v[2]} for v in _records(text, 3)
    ]


def load_orders(text: str) -> list[dict[str, object]]:
    """Orders from ``id<TAB>user_id<TAB>amount<TAB>note`` lines."""
    return [
        {
            "id": int(v[0] or 0),
            "user_id": int(v[1] or 0),
            "amount": float(v[2] or 0),
            "note": v[3],
        }
        for v in _records(text, 4)
    ]


def totals_by_user(orders: list[dict[str, object]]) -> dict[int, float]:
    """The summed order amount of each user id."""
    totals: dict[int, float] = {}
    for order in orders:
        uid = int(order["user_id"])  # type: ignore[call-overload]
        totals[uid] = totals.get(uid, 0.0) + float(order["amount"])  # type: ignore[arg-type]
    return totals
