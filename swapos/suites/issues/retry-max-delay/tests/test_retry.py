import pytest

from solution import backoff, call_with_retry


def failing(times, exc=OSError):
    state = {"calls": 0}

    def fn():
        state["calls"] += 1
        if state["calls"] <= times:
            raise exc(f"failure {state['calls']}")
        return "ok"

    return fn, state


def test_delays_are_capped_and_no_sleep_after_last_attempt():
    fn, state = failing(100)
    delays = []
    with pytest.raises(OSError, match="failure 6"):
        call_with_retry(fn, attempts=6, base_delay=1.0, max_delay=5.0, sleep=delays.append)
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert state["calls"] == 6


def test_success_after_failures_returns_value():
    fn, state = failing(2)
    delays = []
    assert call_with_retry(fn, attempts=3, base_delay=0.5, sleep=delays.append) == "ok"
    assert delays == [0.5, 1.0]
    assert state["calls"] == 3


def test_single_attempt_never_sleeps():
    fn, _ = failing(1)
    delays = []
    with pytest.raises(OSError):
        call_with_retry(fn, attempts=1, sleep=delays.append)
    assert delays == []


def test_non_retryable_error_propagates_at_once():
    fn, state = failing(1, exc=KeyError)
    delays = []
    with pytest.raises(KeyError):
        call_with_retry(fn, attempts=5, sleep=delays.append)
    assert state["calls"] == 1 and delays == []


def test_backoff_doubles():
    assert [backoff(n, 0.25) for n in (1, 2, 3)] == [0.25, 0.5, 1.0]


def test_attempts_must_be_positive():
    with pytest.raises(ValueError):
        call_with_retry(lambda: 1, attempts=0)
