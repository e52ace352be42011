import pytest

from solution import fill, indent_block, shorten, wrap


@pytest.mark.parametrize(
    "text, width, lines",
    [
        ("the quick brown fox", 10, ["the quick", "brown fox"]),
        ("supercalifragilistic is long", 10, ["supercalifragilistic", "is long"]),
        ("abcde fghij", 5, ["abcde", "fghij"]),
        ("", 10, []),
        ("   ", 10, []),
        ("a bb ccc", 4, ["a bb", "ccc"]),
        ("x " * 3, 1, ["x", "x", "x"]),
    ],
)
def test_wrap(text, width, lines):
    assert wrap(text, width) == lines


def test_lines_never_start_empty():
    for width in range(1, 12):
        assert all(wrap("one three seventeen a", width))


def test_fill_and_indent():
    assert fill("aaa bbb ccc", 7) == "aaa bbb\nccc"
    assert indent_block("aaa bbb ccc", "> ", 9) == "> aaa bbb\n> ccc"


def test_shorten_unchanged():
    assert shorten("Hello  world!", 12) == "Hello world!"
    assert shorten("Hello world, how are you", 18) == "Hello world, [...]"


def test_width_must_be_positive():
    with pytest.raises(ValueError):
        wrap("a", 0)
