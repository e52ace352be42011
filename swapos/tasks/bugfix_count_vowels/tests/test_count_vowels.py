from solution import count_vowels


def test_lowercase() -> None:
    assert count_vowels("hello world") == 3


def test_uppercase() -> None:
    assert count_vowels("AEIOU") == 5


def test_mixed_case() -> None:
    assert count_vowels("Python Is Fun") == 3


def test_no_vowels() -> None:
    assert count_vowels("rhythm") == 0
    assert count_vowels("") == 0
