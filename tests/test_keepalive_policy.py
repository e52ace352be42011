"""``keep_alive`` as Ollama's clients send it, and the expiry of the hint it leaves."""

from __future__ import annotations

import pytest

from swapos.policies.keepalive import FOREVER, KeepAlive, KeepAliveError, parse_keep_alive


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        (0, 0.0),
        ("0", 0.0),
        (300, 300.0),
        (2.5, 2.5),
        (-1, FOREVER),
        ("-1m", FOREVER),
        ("5m", 300.0),
        ("30s", 30.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("1.5h", 5400.0),
        (" 10s ", 10.0),
    ],
)
def test_keep_alive_values(value: float | str | None, seconds: float | None) -> None:
    assert parse_keep_alive(value) == seconds


@pytest.mark.parametrize("value", ["soon", "300", "5 m", "m", "", "1h-5m", "5d", True])
def test_keep_alive_that_is_no_duration_is_refused(value: str | bool) -> None:
    with pytest.raises(KeepAliveError):
        parse_keep_alive(value)


def test_a_hint_expires_after_its_idle_time_and_is_spent() -> None:
    keep = KeepAlive()
    keep.finished("a", 30.0, now=10.0)
    assert keep.expires_at("a") == 40.0
    assert keep.next_expiry() == 40.0
    assert keep.expired(39.9) == []
    assert keep.expired(40.0) == ["a"]
    assert keep.expired(100.0) == []  # spent
    assert keep.next_expiry() == FOREVER


def test_a_busy_model_is_not_expired_its_timer_restarts() -> None:
    keep = KeepAlive()
    keep.finished("a", 5.0, now=0.0)
    assert keep.expired(6.0, busy={"a"}) == []
    assert keep.expires_at("a") == 11.0
    assert keep.expired(11.0) == ["a"]


def test_a_request_without_keep_alive_restarts_the_timer_and_forever_drops_it() -> None:
    keep = KeepAlive()
    keep.finished("a", 5.0, now=0.0)
    keep.finished("a", None, now=3.0)
    assert keep.expires_at("a") == 8.0
    keep.finished("a", FOREVER, now=4.0)
    assert keep.expires_at("a") == FOREVER
    keep.finished("b", None, now=4.0)  # no hint: nothing to restart
    assert keep.expires_at("b") == FOREVER
