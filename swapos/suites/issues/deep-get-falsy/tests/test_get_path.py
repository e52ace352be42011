import pytest

from solution import flatten, get_path, set_path

CONFIG = {
    "retries": 0,
    "name": "",
    "debug": False,
    "tags": [],
    "servers": [{"host": "a"}, {"host": "b", "port": 0}],
    "nested": {"deep": {"value": None}},
}


@pytest.mark.parametrize(
    "path, default, expected",
    [
        ("retries", 3, 0),
        ("name", "x", ""),
        ("debug", True, False),
        ("tags", None, []),
        ("servers.1.host", None, "b"),
        ("servers.1.port", 80, 0),
        ("servers.-1.host", None, "b"),
        ("servers.5.host", "?", "?"),
        ("servers.x", "?", "?"),
        ("missing.key", "d", "d"),
        ("retries.deeper", "d", "d"),
        ("nested.deep.value", "d", None),
    ],
)
def test_get_path(path, default, expected):
    assert get_path(CONFIG, path, default=default) == expected


def test_set_and_flatten_unchanged():
    data = {}
    set_path(data, "a.b.c", 1)
    set_path(data, "a.d", 2)
    assert data == {"a": {"b": {"c": 1}, "d": 2}}
    assert flatten(data) == {"a.b.c": 1, "a.d": 2}
