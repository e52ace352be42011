import pytest

from solution import compare, latest, parse, sort_versions


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("1.0.0", "1.0.0", 0),
        ("1.2.0", "1.10.0", -1),
        ("2.0.0", "1.99.99", 1),
    ],
)
def test_release_versions(a, b, expected):
    assert compare(a, b) == expected


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("1.0.0-alpha", "1.0.0", -1),
        ("1.0.0", "1.0.0-rc.1", 1),
        ("1.0.0-alpha.2", "1.0.0-alpha.10", -1),
        ("1.0.0-beta", "1.0.0-alpha.1", 1),
        ("1.0.0-alpha", "1.0.0-alpha.1", -1),
        ("1.0.0-1", "1.0.0-alpha", -1),
        ("1.0.0-rc.1", "1.0.0-rc.1", 0),
        ("1.0.0+build.5", "1.0.0", 0),
        ("1.0.0-alpha+x", "1.0.0-alpha+y", 0),
    ],
)
def test_pre_release_precedence(a, b, expected):
    assert compare(a, b) == expected


def test_semver_spec_order():
    spec = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
    ]
    assert sort_versions(list(reversed(spec))) == spec


def test_latest_prefers_the_release():
    assert latest(["2.0.0-rc.1", "2.0.0", "1.9.0"]) == "2.0.0"


def test_parse_rejects_garbage():
    with pytest.raises(ValueError):
        parse("1.0")
    assert parse("1.2.3-x+y").pre == "x"
