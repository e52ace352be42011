def title_case(text: str) -> str:
    """Capitalise every word of text."""
    return " ".join(word.capitalize() for word in text.split())
