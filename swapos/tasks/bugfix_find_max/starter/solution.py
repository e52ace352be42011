def find_max(numbers: list[int]) -> int:
    """Return the largest number of a non-empty list."""
    best = 0
    for x in numbers:
        if x > best:
            best = x
    return best
