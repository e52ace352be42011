from solution import normalise_row, read_rows


def test_example() -> None:
    assert normalise_row({" Email ": " Ada@Example.org ", "Phone": "  "}) == {
        "email": "Ada@Example.org",
        "phone": None,
    }


def test_inner_whitespace_in_keys() -> None:
    assert normalise_row({" First  Name ": "Ada", "Zip\tCode": "123"}) == {
        "first_name": "Ada",
        "zip_code": "123",
    }


def test_empty_value_becomes_none() -> None:
    assert normalise_row({"a": ""}) == {"a": None}


def test_input_is_not_modified() -> None:
    row = {" A ": " x "}
    normalise_row(row)
    assert row == {" A ": " x "}


def test_with_read_rows() -> None:
    rows = read_rows("Name , Age ,Note\n bob , 42 ,\nAlice,7, hi \n")
    assert [normalise_row(r) for r in rows] == [
        {"name": "bob", "age": "42", "note": None},
        {"name": "Alice", "age": "7", "note": "hi"},
    ]
