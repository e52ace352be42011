from solution import backoff_delay


def test_first_retry_waits_base() -> None:
    assert backoff_delay(1) == 0.5


def test_delay_doubles() -> None:
    assert [backoff_delay(a) for a in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]


def test_delay_is_capped() -> None:
    assert backoff_delay(20) == 30.0


def test_custom_base_and_cap() -> None:
    assert backoff_delay(3, base=1.0, cap=5.0) == 4.0
    assert backoff_delay(4, base=1.0, cap=5.0) == 5.0
