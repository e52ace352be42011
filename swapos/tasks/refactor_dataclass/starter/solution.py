def parse_point(text: str) -> tuple[float, float]:
    """Parse "x,y" (spaces allowed) into the point's coordinates."""
    x, y = text.split(",")
    return float(x), float(y)


def distance(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Euclidean distance between two points."""
    return ((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5
