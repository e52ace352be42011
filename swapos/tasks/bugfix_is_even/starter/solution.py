def is_even(n: int) -> bool:
    """Return True if n is even."""
    return n % 2 == 1
