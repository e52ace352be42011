def pair_sums(xs: list[int], ys: list[int]) -> list[int]:
    """Return [xs[0] + ys[0], xs[1] + ys[1], ...] for two lists of the same length."""
    return [x + y for x, y in zip(xs, ys)]
