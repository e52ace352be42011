import re


def title_case(text: str) -> str:
    """Capitalise every word of text."""
    return " ".join(word.capitalize() for word in text.split())


def slugify(title: str) -> str:
    """Lowercase title; runs of non-alphanumerics become one '-'; no '-' at either end."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
