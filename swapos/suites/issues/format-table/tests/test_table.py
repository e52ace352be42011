import pytest

from solution import format_record, format_table


def test_the_readme_example():
    table = format_table([["apple", 3, 1.5], ["kiwi", 12, None]], ["fruit", "qty", "price"])
    assert table == (
        "fruit  qty  price\n"
        "-----  ---  -----\n"
        "apple    3   1.50\n"
        "kiwi    12"
    )


def test_explicit_alignment_and_wide_headers():
    table = format_table([["a", "b"]], ["left", "right"], align="lr")
    assert table == "left  right\n----  -----\na         b"


def test_column_as_wide_as_widest_cell():
    table = format_table([["x", 1000000], ["longer name", 2]], ["n", "v"])
    assert table.splitlines() == [
        "n                  v",
        "-----------  -------",
        "x            1000000",
        "longer name        2",
    ]


def test_no_rows():
    assert format_table([], ["a", "bb"]) == "a  bb\n-  --"


def test_ragged_row_is_an_error():
    with pytest.raises(ValueError):
        format_table([["a"]], ["x", "y"])


def test_record_unchanged():
    assert format_record({"id": 7, "ratio": 0.5}) == "id   : 7\nratio: 0.50"
