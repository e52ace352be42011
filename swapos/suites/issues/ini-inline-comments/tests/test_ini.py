import pytest

from solution import IniError, get_int, parse_ini

CONFIG = """\
# global defaults
timeout = 30   ; seconds

[server]
host = example.org  # primary
port=8080
path = /api;v2

[empty]
; nothing here
"""


def test_the_deploy_config_from_the_report():
    assert parse_ini(CONFIG) == {
        "DEFAULT": {"timeout": "30"},
        "server": {"host": "example.org", "port": "8080", "path": "/api;v2"},
        "empty": {},
    }


def test_hash_without_space_is_kept():
    assert parse_ini("[a]\ntag = a;b\nurl = x#y\n") == {"a": {"tag": "a;b", "url": "x#y"}}


def test_tab_before_comment():
    assert parse_ini("[a]\nk = v\t; note\n") == {"a": {"k": "v"}}


def test_get_int_falls_back_to_default_section():
    config = parse_ini(CONFIG)
    assert get_int(config, "server", "port", 80) == 8080
    assert get_int(config, "server", "timeout", 5) == 30
    assert get_int(config, "server", "retries", 3) == 3


def test_bad_line_names_its_number():
    with pytest.raises(IniError) as info:
        parse_ini("[a]\nk = v\nnonsense\n")
    assert info.value.lineno == 3
