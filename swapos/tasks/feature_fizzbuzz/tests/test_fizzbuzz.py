from solution import fizzbuzz, is_divisible


def test_plain_numbers() -> None:
    assert fizzbuzz(1) == "1"
    assert fizzbuzz(7) == "7"


def test_fizz_and_buzz() -> None:
    assert fizzbuzz(9) == "Fizz"
    assert fizzbuzz(10) == "Buzz"


def test_fizzbuzz() -> None:
    assert fizzbuzz(15) == "FizzBuzz"
    assert fizzbuzz(45) == "FizzBuzz"


def test_existing_helper_kept() -> None:
    assert is_divisible(12, 4)
