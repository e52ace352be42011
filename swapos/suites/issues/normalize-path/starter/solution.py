"""Pure string helpers for POSIX-style paths (no file system access)."""

from __future__ import annotations

SEP = "/"


def split_segments(path: str) -> list[str]:
    """The non-empty segments of ``path`` (duplicate and trailing slashes ignored)."""
    return [part for part in path.split(SEP) if part]


def normalize(path: str) -> str:
    """Collapse ``.``, ``..`` and repeated separators in ``path``.

    >>> normalize("a//b/./c/")
    'a/b/c'
    """
    absolute = path.startswith(SEP)
    stack: list[str] = []
    for part in split_segments(path):
        if part == ".":
            continue
        if part == "..":
            if stack:
                stack.pop()
            elif absolute:
                stack.append(part)
            continue
        stack.append(part)
    body = SEP.join(stack)
    if absolute:
        return SEP + body
    return body or "."


def join(*parts: str) -> str:
    """Join path parts; an absolute part discards what came before it."""
    result = ""
    for part in parts:
        if part.startswith(SEP) or not result:
            result = part
        else:
            result = result.rstrip(SEP) + SEP + part
    return normalize(result) if result else "."


def is_within(path: str, root: str) -> bool:
    """Whether ``path`` (normalized) lies inside ``root`` (normalized)."""
    p, r = split_segments(normalize(path)), split_segments(normalize(root))
    return p[: len(r)] == r
