def first_negative(numbers: list[int]) -> int:
    """Return the index of the first negative number, or -1 if there is none."""
    for i, x in enumerate(numbers):
        if x < 0:
            return i
    return -1
