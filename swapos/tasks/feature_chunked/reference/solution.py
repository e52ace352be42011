"""Helpers for sending records to the API in batches."""


def chunked(items: list, size: int) -> list[list]:
    """Split items into consecutive batches of size items (the last may be shorter)."""
    if size < 1:
        raise ValueError("size must be at least 1")
    return [items[i : i + size] for i in range(0, len(items), size)]
