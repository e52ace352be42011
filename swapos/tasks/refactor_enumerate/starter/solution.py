def first_negative(numbers: list[int]) -> int:
    """Return the index of the first negative number, or -1 if there is none."""
    for i in range(len(numbers)):
        if numbers[i] < 0:
            return i
    return -1
