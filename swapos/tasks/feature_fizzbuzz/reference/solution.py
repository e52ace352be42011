def is_divisible(n: int, d: int) -> bool:
    """Return True if d divides n."""
    return n % d == 0


def fizzbuzz(n: int) -> str:
    """Return "Fizz", "Buzz", "FizzBuzz" or n as text."""
    if is_divisible(n, 15):
        return "FizzBuzz"
    if is_divisible(n, 3):
        return "Fizz"
    if is_divisible(n, 5):
        return "Buzz"
    return str(n)
