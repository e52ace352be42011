def pair_sums(xs: list[int], ys: list[int]) -> list[int]:
    """Return [xs[0] + ys[0], xs[1] + ys[1], ...] for two lists of the same length."""
    result = []
    for i in range(len(xs)):
        result.append(xs[i] + ys[i])
    return result
