from solution import compare_versions


def test_equal() -> None:
    assert compare_versions("1.2.3", "1.2.3") == 0


def test_simple_order() -> None:
    assert compare_versions("1.0.0", "1.0.1") == -1
    assert compare_versions("2.0.0", "1.9.9") == 1


def test_multi_digit_minor() -> None:
    assert compare_versions("1.10.0", "1.9.0") == 1
    assert compare_versions("1.9.0", "1.10.0") == -1


def test_multi_digit_major_and_patch() -> None:
    assert compare_versions("2.0.0", "10.0.0") == -1
    assert compare_versions("0.1.12", "0.1.3") == 1
