from solution import word_count


def test_counts_words_case_insensitively() -> None:
    assert word_count("the cat and The dog") == {"the": 2, "cat": 1, "and": 1, "dog": 1}


def test_empty_text() -> None:
    assert word_count("") == {}


def test_repeated_word() -> None:
    assert word_count("go go go") == {"go": 3}
