from solution import parse_query


def test_simple_pairs() -> None:
    assert parse_query("a=1&b=2") == {"a": "1", "b": "2"}


def test_value_containing_equals() -> None:
    assert parse_query("sig=abc==") == {"sig": "abc=="}
    assert parse_query("q=x=y&page=2") == {"q": "x=y", "page": "2"}


def test_empty_query() -> None:
    assert parse_query("") == {}


def test_empty_pieces_are_skipped() -> None:
    assert parse_query("a=1&&b=2&") == {"a": "1", "b": "2"}


def test_empty_value() -> None:
    assert parse_query("name=") == {"name": ""}
