def order_report(orders: list[dict]) -> str:
    """Summarise orders: how many, the total amount, and the ids of large orders."""
    total = 0.0
    for order in orders:
        total += order["amount"]
    large = []
    for order in orders:
        if order["amount"] >= 100:
            large.append(order["id"])
    lines = [f"orders: {len(orders)}", f"total: {total:.2f}"]
    if large:
        lines.append("large: " + ", ".join(large))
    else:
        lines.append("large: none")
    return "\n".join(lines)
