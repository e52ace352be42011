"""Loaders for the nightly TSV exports."""

from __future__ import annotations

NULL = "\\N"


def load_users(text: str) -> list[dict[str, object]]:
    """Users from ``id<TAB>name<TAB>email`` lines."""
    users = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split("\t")]
        if len(cells) != 3:
            raise ValueError(f"line {lineno}: expected 3 columns, got {len(cells)}")
        values = [None if c == NULL else c for c in cells]
        users.append({"id": int(values[0]), "name": values[1], "email": values[2]})
    return users


def load_orders(text: str) -> list[dict[str, object]]:
    """Orders from ``id<TAB>user_id<TAB>amount<TAB>note`` lines."""
    orders = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split("\t")]
        if len(cells) != 4:
            raise ValueError(f"line {lineno}: expected 4 columns, got {len(cells)}")
        values = [None if c == NULL else c for c in cells]
        orders.append(
            {
                "id": int(values[0]),
                "user_id": int(values[1]),
                "amount": float(values[2]),
                "note": values[3],
            }
        )
    return orders


def totals_by_user(orders: list[dict[str, object]]) -> dict[int, float]:
    """The summed order amount of each user id."""
    totals: dict[int, float] = {}
    for order in orders:
        uid = int(order["user_id"])  # type: ignore[call-overload]
        totals[uid] = totals.get(uid, 0.0) + float(order["amount"])  # type: ignore[arg-type]
    return totals
