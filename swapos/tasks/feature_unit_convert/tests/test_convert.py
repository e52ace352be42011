import pytest
from solution import METRES_PER_UNIT, convert


def test_km_to_m() -> None:
    assert convert(1, "km", "m") == pytest.approx(1000.0)


def test_inches_to_feet() -> None:
    assert convert(12, "in", "ft") == pytest.approx(1.0)


def test_miles_to_km() -> None:
    assert convert(2, "mi", "km") == pytest.approx(3.218688)


def test_same_unit() -> None:
    assert convert(5.5, "cm", "cm") == pytest.approx(5.5)


def test_small_to_large() -> None:
    assert convert(2500, "mm", "m") == pytest.approx(2.5)


def test_unknown_unit_raises() -> None:
    with pytest.raises(ValueError, match="yd"):
        convert(1, "yd", "m")
    with pytest.raises(ValueError, match="parsec"):
        convert(1, "m", "parsec")


def test_table_unchanged() -> None:
    assert METRES_PER_UNIT["ft"] == 0.3048
    assert len(METRES_PER_UNIT) == 7
