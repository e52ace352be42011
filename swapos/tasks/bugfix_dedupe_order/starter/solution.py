def dedupe(items: list) -> list:
    """Return items without duplicates, keeping each first occurrence, in order."""
    return list(set(items))
