import math

from solution import celsius_to_fahrenheit, fahrenheit_to_celsius


def test_known_points() -> None:
    assert math.isclose(fahrenheit_to_celsius(212), 100.0)
    assert math.isclose(fahrenheit_to_celsius(32), 0.0, abs_tol=1e-9)
    assert math.isclose(fahrenheit_to_celsius(-40), -40.0)


def test_round_trip() -> None:
    for c in (-10.0, 0.0, 37.5, 100.0):
        assert math.isclose(fahrenheit_to_celsius(celsius_to_fahrenheit(c)), c, abs_tol=1e-9)
