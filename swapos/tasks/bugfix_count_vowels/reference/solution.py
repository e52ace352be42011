VOWELS = "aeiou"


def count_vowels(text: str) -> int:
    """Return how many vowels (a, e, i, o, u, any case) text contains."""
    return sum(1 for ch in text.lower() if ch in VOWELS)
