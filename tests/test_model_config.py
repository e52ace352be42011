"""A profile model's serving fields: ``aliases``, ``ttl`` and ``pin``."""

from __future__ import annotations

import pytest

from swapos.data.durations import FOREVER, DurationError, parse_duration
from swapos.errors import ProfileError
from swapos.models.profile import decode_profile, ttl_seconds

BASE = """
[models.big]
path = "/models/big.gguf"
{big}
[models.small]
path = "/models/small.gguf"
{small}
"""


def profile(big: str = "", small: str = "") -> str:
    return BASE.format(big=big, small=small)


def test_aliases_ttl_and_pin_decode() -> None:
    p = decode_profile(profile('aliases = ["coder", "qwen:1.5b"]\nttl = "5m"\npin = true'))
    big = p.models["big"]
    assert big.aliases == ["coder", "qwen:1.5b"] and big.pin is True
    assert ttl_seconds(big) == 300.0
    small = p.models["small"]
    assert small.aliases == [] and small.pin is False and ttl_seconds(small) is None


@pytest.mark.parametrize(
    ("big", "small", "error"),
    [
        ('aliases = ["small"]', "", "'small' is already the name of 'small'"),
        ('aliases = ["x"]', 'aliases = ["x"]', "'x' is already the name of 'big'"),
        ('aliases = ["x", "x"]', "", "'x' is already the name of 'big'"),
        ('aliases = [" "]', "", "is empty"),
        ('ttl = "soon"', "", "`models.big.ttl` = 'soon'"),
        ("ttl = -1", "", "`models.big.ttl` = -1"),
        ('ttl = "-5m"', "", "`models.big.ttl` = '-5m'"),
    ],
)
def test_bad_serving_fields_are_errors_naming_them(big: str, small: str, error: str) -> None:
    with pytest.raises(ProfileError, match=error.replace("(", r"\(")):
        decode_profile(profile(big, small))


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(30, 30.0), (0.5, 0.5), ("90s", 90.0), ("1h30m", 5400.0), ("0", 0.0), (-1, FOREVER)],
)
def test_durations(value: float | str, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["soon", "5", "5 m", "", True])
def test_bad_durations(value: float | str) -> None:
    with pytest.raises(DurationError):
        parse_duration(value)
