def squares(n: int) -> list[int]:
    """Return the squares of 0 .. n-1."""
    return [i * i for i in range(n)]
