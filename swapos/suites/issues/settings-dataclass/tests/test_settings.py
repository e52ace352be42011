import ast
import dataclasses
from pathlib import Path

import pytest

import solution


def test_behaviour_defaults_and_overrides():
    s = solution.load_settings({})
    assert solution.describe(s) == "http://localhost:8080/ (production, 3 retries)"
    s = solution.load_settings(
        {"APP_HOST": " db.internal ", "APP_PORT": "5432", "APP_DEBUG": "Yes", "APP_RETRIES": "0"}
    )
    assert solution.server_url(s) == "http://db.internal:5432/"
    assert solution.describe(s) == "http://db.internal:5432/ (debug, 0 retries)"
    assert solution.server_url(solution.load_settings({"APP_HOST": "  "})) == (
        "http://localhost:8080/"
    )


@pytest.mark.parametrize(
    "env, message",
    [
        ({"APP_PORT": "http"}, "APP_PORT: expected an integer"),
        ({"APP_PORT": "70000"}, "outside 1..65535"),
        ({"APP_DEBUG": "maybe"}, "APP_DEBUG: expected a boolean"),
        ({"APP_RETRIES": "11"}, "outside 0..10"),
    ],
)
def test_behaviour_validation(env, message):
    with pytest.raises(ValueError, match=message):
        solution.load_settings(env)


def test_structure_settings_is_a_frozen_dataclass():
    assert dataclasses.is_dataclass(solution.Settings)
    fields = {f.name: f.default for f in dataclasses.fields(solution.Settings)}
    assert fields == {"host": "localhost", "port": 8080, "debug": False, "retries": 3}
    s = solution.load_settings({"APP_PORT": "9000"})
    assert isinstance(s, solution.Settings) and s.port == 9000
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.port = 1


def test_structure_no_dict_lookups_of_settings_and_no_defaults_dict():
    tree = ast.parse(Path(solution.__file__).read_text())
    subscripts = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Subscript)
        and isinstance(n.slice, ast.Constant)
        and n.slice.value in {"host", "port", "debug", "retries"}
    ]
    assert not subscripts
    assert not hasattr(solution, "DEFAULTS")
