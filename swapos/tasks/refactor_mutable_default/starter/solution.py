def add_tag(tag: str, tags: list[str] = []) -> list[str]:
    """Append tag to tags (a new list when none is given) and return the list."""
    tags.append(tag)
    return tags
