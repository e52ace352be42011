def compare_versions(a: str, b: str) -> int:
    """Compare "MAJOR.MINOR.PATCH" versions: -1 if a < b, 0 if equal, 1 if a > b."""
    pa = tuple(int(p) for p in a.split("."))
    pb = tuple(int(p) for p in b.split("."))
    if pa == pb:
        return 0
    return -1 if pa < pb else 1
