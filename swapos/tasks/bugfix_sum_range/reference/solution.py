def sum_range(n: int) -> int:
    """Return 1 + 2 + ... + n (0 when n < 1)."""
    total = 0
    for i in range(1, n + 1):
        total += i
    return total
