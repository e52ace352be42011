def average(numbers: list[float]) -> float:
    """Return the mean of numbers (0.0 for an empty list)."""
    return sum(numbers) // len(numbers)
