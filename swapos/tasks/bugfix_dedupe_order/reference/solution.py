def dedupe(items: list) -> list:
    """Return items without duplicates, keeping each first occurrence, in order."""
    seen = set()
    result = []
    for item in items:
        if item not in seen:
            seen.add(item)
            result.append(item)
    return result
