def order_total(orders: list[dict]) -> float:
    """The sum of the orders' amounts."""
    return float(sum(order["amount"] for order in orders))


def large_order_ids(orders: list[dict]) -> list[str]:
    """Ids of the orders of 100 or more, in order."""
    return [order["id"] for order in orders if order["amount"] >= 100]


def format_report(count: int, total: float, large_ids: list[str]) -> str:
    """The report text."""
    large = ", ".join(large_ids) if large_ids else "none"
    return f"orders: {count}\ntotal: {total:.2f}\nlarge: {large}"


def order_report(orders: list[dict]) -> str:
    """Summarise orders: how many, the total amount, and the ids of large orders."""
    return format_report(len(orders), order_total(orders), large_order_ids(orders))
