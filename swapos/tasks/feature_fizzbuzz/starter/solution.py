def is_divisible(n: int, d: int) -> bool:
    """Return True if d divides n."""
    return n % d == 0
