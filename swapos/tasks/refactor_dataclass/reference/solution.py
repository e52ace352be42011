from dataclasses import dataclass


@dataclass
class Point:
    x: float
    y: float


def parse_point(text: str) -> Point:
    """Parse "x,y" (spaces allowed) into a Point."""
    x, y = text.split(",")
    return Point(float(x), float(y))


def distance(a: Point, b: Point) -> float:
    """Euclidean distance between two points."""
    return ((a.x - b.x) ** 2 + (a.y - b.y) ** 2) ** 0.5
