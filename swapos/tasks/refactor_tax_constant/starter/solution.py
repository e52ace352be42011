def tax(price: float) -> float:
    """Return the tax due on price, rounded to cents."""
    return round(price * 0.2, 2)


def price_with_tax(price: float) -> float:
    """Return price plus tax, rounded to cents."""
    return round(price * 1.2, 2)
