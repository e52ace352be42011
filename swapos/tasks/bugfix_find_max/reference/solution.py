def find_max(numbers: list[int]) -> int:
    """Return the largest number of a non-empty list."""
    best = numbers[0]
    for x in numbers[1:]:
        if x > best:
            best = x
    return best
