def add_tag(tag: str, tags: list[str] | None = None) -> list[str]:
    """Append tag to tags (a new list when none is given) and return the list."""
    if tags is None:
        tags = []
    tags.append(tag)
    return tags
