import pytest

from solution import base_url, query_params, with_query


@pytest.mark.parametrize(
    "url, params, expected",
    [
        (
            "https://api.example.org/items?sort=asc",
            {"page": 2},
            "https://api.example.org/items?sort=asc&page=2",
        ),
        ("/a?page=1&x=y", {"page": 3}, "/a?page=3&x=y"),
        ("/a?page=1&x=y", {"page": None}, "/a?x=y"),
        ("/a?page=1", {"page": None}, "/a"),
        ("/a", {"q": "a b&c"}, "/a?q=a+b%26c"),
        ("/a", {"b": 1, "a": 2}, "/a?b=1&a=2"),
        ("/a?x=1#top", {"y": "2"}, "/a?x=1&y=2#top"),
        ("/a?flag=&x=1", {"x": 2}, "/a?flag=&x=2"),
        ("/a", {}, "/a"),
    ],
)
def test_with_query(url, params, expected):
    assert with_query(url, **params) == expected


def test_helpers_unchanged():
    assert base_url("https://h/p?q=1#f") == "https://h/p"
    assert query_params("/a?x=1&x=2&y=") == {"x": "2", "y": ""}
