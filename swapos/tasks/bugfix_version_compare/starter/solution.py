def compare_versions(a: str, b: str) -> int:
    """Compare "MAJOR.MINOR.PATCH" versions: -1 if a < b, 0 if equal, 1 if a > b."""
    if a == b:
        return 0
    return -1 if a < b else 1
