def parse_query(query: str) -> dict[str, str]:
    """Parse a query string such as "a=1&b=2" into {"a": "1", "b": "2"}."""
    result = {}
    for pair in query.split("&"):
        if not pair:
            continue
        key, value = pair.split("=", 1)
        result[key] = value
    return result
