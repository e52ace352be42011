def split_path(path: str) -> list[str]:
    """Split a URL path into its non-empty segments: "/a//b/" -> ["a", "b"]."""
    return [segment for segment in path.split("/") if segment]


def join_path(*parts: str) -> str:
    """Join URL path pieces with single slashes; leading '/' kept from the first part."""
    joined = "/".join(segment for part in parts for segment in split_path(part))
    if parts and parts[0].startswith("/"):
        return "/" + joined
    return joined
