import pytest

from solution import slugify, unique_slug


@pytest.mark.parametrize(
    "title, taken, expected",
    [
        ("Hello World", set(), "hello-world"),
        ("Hello World", {"hello-world"}, "hello-world-2"),
        ("Hello World", {"hello-world", "hello-world-2"}, "hello-world-3"),
        ("Hello World", {"hello-world", "hello-world-3"}, "hello-world-2"),
        ("!!!", {"untitled"}, "untitled-2"),
        ("Crème brûlée", {"other"}, "creme-brulee"),
    ],
)
def test_unique_slug(title, taken, expected):
    assert unique_slug(title, taken) == expected


def test_taken_is_not_modified():
    taken = {"a", "a-2"}
    assert unique_slug("A", taken) == "a-3"
    assert taken == {"a", "a-2"}


def test_slugify_unchanged():
    assert slugify("  Hello,   World! ") == "hello-world"
    assert slugify("") == "untitled"
