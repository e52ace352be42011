import pytest

from solution import format_duration, parse_duration


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("1h30m", 5400),
        ("2d 4h", 187200),
        (" 90 ", 90),
        ("45s", 45),
        ("0s", 0),
        ("1d2h3m4s", 93784),
        ("10m 5s", 605),
    ],
)
def test_parse(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("seconds", [0, 1, 59, 60, 3725, 86399, 86400, 90061])
def test_round_trip(seconds):
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("bad", ["", "   ", "1x", "30m1h", "1h1h", "-5s", "1.5h", "h", "1 h"])
def test_rejects(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)
