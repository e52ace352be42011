import copy

from solution import DEFAULT_CONFIG, deep_merge


def test_nested_key_is_merged() -> None:
    assert deep_merge({"server": {"host": "a", "port": 80}}, {"server": {"port": 81}}) == {
        "server": {"host": "a", "port": 81}
    }


def test_new_keys_are_added() -> None:
    assert deep_merge({"a": 1}, {"b": 2}) == {"a": 1, "b": 2}


def test_three_levels_deep() -> None:
    merged = deep_merge(DEFAULT_CONFIG, {"logging": {"handlers": {"file": "x.log"}}})
    assert merged == {
        "server": {"host": "127.0.0.1", "port": 8080},
        "logging": {"level": "info", "handlers": {"console": True, "file": "x.log"}},
    }


def test_non_dict_override_replaces() -> None:
    assert deep_merge({"a": {"b": 1}}, {"a": 5}) == {"a": 5}
    assert deep_merge({"a": 5}, {"a": {"b": 1}}) == {"a": {"b": 1}}


def test_inputs_are_not_modified() -> None:
    base = copy.deepcopy(DEFAULT_CONFIG)
    override = {"server": {"port": 9000}, "debug": True}
    override_before = copy.deepcopy(override)
    merged = deep_merge(base, override)
    assert base == DEFAULT_CONFIG
    assert override == override_before
    assert merged["server"] == {"host": "127.0.0.1", "port": 9000}
    assert merged["debug"] is True
