import pytest

from solution import format_duration, format_size, progress


@pytest.mark.parametrize(
    "n, text",
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (1048575, "1.0 MiB"),
        (1048576, "1.0 MiB"),
        (1023.96 * 1024**3, "1.0 TiB"),
        (1023.9 * 1024**2, "1023.9 MiB"),
        (5 * 1024**6, "5120.0 PiB"),
        (-2048, "-2.0 KiB"),
    ],
)
def test_format_size(n, text):
    assert format_size(n) == text


def test_durations_unchanged():
    assert format_duration(3.5) == "3.5s"
    assert format_duration(123) == "2m 03s"
    assert format_duration(3723) == "1h 02m 03s"


def test_progress():
    assert progress(1048575, 2 * 1048576) == "1.0 MiB / 2.0 MiB (49%)"
