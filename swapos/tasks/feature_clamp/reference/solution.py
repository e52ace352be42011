def percent(part: float, whole: float) -> float:
    """Return part as a percentage of whole (0.0 when whole is 0)."""
    if whole == 0:
        return 0.0
    return 100.0 * part / whole


def clamp(value: float, low: float, high: float) -> float:
    """Limit value to the range [low, high]."""
    if value < low:
        return low
    if value > high:
        return high
    return value
