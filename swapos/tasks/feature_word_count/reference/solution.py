def words(text: str) -> list[str]:
    """Split text into lowercase words (runs of non-space characters)."""
    return text.lower().split()


def word_count(text: str) -> dict[str, int]:
    """Return how many times each word of text occurs."""
    counts: dict[str, int] = {}
    for word in words(text):
        counts[word] = counts.get(word, 0) + 1
    return counts
