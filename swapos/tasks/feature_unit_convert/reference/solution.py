METRES_PER_UNIT = {
    "mm": 0.001,
    "cm": 0.01,
    "m": 1.0,
    "km": 1000.0,
    "in": 0.0254,
    "ft": 0.3048,
    "mi": 1609.344,
}


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """Convert a length from from_unit to to_unit."""
    for unit in (from_unit, to_unit):
        if unit not in METRES_PER_UNIT:
            raise ValueError(f"unknown unit: {unit}")
    return value * METRES_PER_UNIT[from_unit] / METRES_PER_UNIT[to_unit]
