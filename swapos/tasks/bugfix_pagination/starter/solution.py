def page_items(items: list, page: int, per_page: int) -> list:
    """Return the items on page number `page` (1-based); [] past the end."""
    start = page * per_page
    return items[start : start + per_page]
