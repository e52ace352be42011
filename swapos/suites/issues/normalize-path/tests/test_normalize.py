import pytest

from solution import is_within, join, normalize


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("a//b/./c/", "a/b/c"),
        ("", "."),
        (".", "."),
        ("/", "/"),
        ("a/b/..", "a"),
        ("/usr/local/../bin", "/usr/bin"),
    ],
)
def test_existing_behaviour(raw, expected):
    assert normalize(raw) == expected


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("a/../../b", "../b"),
        ("../x/./y", "../x/y"),
        ("../../a/..", "../.."),
        ("..", ".."),
    ],
)
def test_relative_paths_keep_unresolved_parent_segments(raw, expected):
    assert normalize(raw) == expected


@pytest.mark.parametrize(
    "raw, expected",
    [("/../etc", "/etc"), ("/a/b/../../..", "/"), ("//..//..", "/")],
)
def test_absolute_paths_stop_at_root(raw, expected):
    assert normalize(raw) == expected


def test_join_and_is_within_use_the_fixed_rules():
    assert join("a", "../../b") == "../b"
    assert join("/srv", "../../etc") == "/etc"
    assert not is_within("data/../../secret", "data")
    assert is_within("data/x/../y", "data")
