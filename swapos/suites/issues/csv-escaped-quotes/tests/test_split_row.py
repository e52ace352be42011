import pytest

from solution import join_row, read_rows, split_row


@pytest.mark.parametrize(
    "line, expected",
    [
        ("a,b,c", ["a", "b", "c"]),
        ('a,"b,c",d', ["a", "b,c", "d"]),
        ("", [""]),
        ("a,,b", ["a", "", "b"]),
    ],
)
def test_plain_rows_still_split(line, expected):
    assert split_row(line) == expected


@pytest.mark.parametrize(
    "line, expected",
    [
        ('id,"say ""hi""",ok', ["id", 'say "hi"', "ok"]),
        ('"a ""b"" c"', ['a "b" c']),
        ('""""', ['"']),
        ('x,"""quoted"", then, commas"', ["x", '"quoted", then, commas']),
    ],
)
def test_doubled_quotes_are_one_quote(line, expected):
    assert split_row(line) == expected


def test_round_trip_through_join_row():
    fields = ['he said "no"', "a,b", "plain", ""]
    assert split_row(join_row(fields)) == fields


def test_read_rows_with_semicolon():
    assert read_rows('a;"b;""c"""\n\n1;2\n', delimiter=";") == [["a", 'b;"c"'], ["1", "2"]]
