def squares(n: int) -> list[int]:
    """Return the squares of 0 .. n-1."""
    result = []
    for i in range(n):
        result.append(i * i)
    return result
