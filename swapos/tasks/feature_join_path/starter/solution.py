def split_path(path: str) -> list[str]:
    """Split a URL path into its non-empty segments: "/a//b/" -> ["a", "b"]."""
    return [segment for segment in path.split("/") if segment]
