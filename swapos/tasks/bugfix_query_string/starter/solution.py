def parse_query(query: str) -> dict[str, str]:
    """Parse a query string such as "a=1&b=2" into {"a": "1", "b": "2"}."""
    result = {}
    for pair in query.split("&"):
        key, value = pair.split("=")
        result[key] = value
    return result
