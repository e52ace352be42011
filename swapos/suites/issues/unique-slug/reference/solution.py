"""URL slugs for blog posts."""

from __future__ import annotations

import re
import unicodedata

_NON_WORD = re.compile(r"[^a-z0-9]+")
FALLBACK = "untitled"
MAX_LENGTH = 60


def slugify(title: str) -> str:
    """``title`` as a lowercase ASCII slug of words joined by ``-`` (``untitled`` if
    nothing is left), at most ``MAX_LENGTH`` characters, never ending in ``-``."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = _NON_WORD.sub("-", ascii_title.lower()).strip("-")
    slug = slug[:MAX_LENGTH].rstrip("-")
    return slug or FALLBACK


def post_path(year: int, title: str) -> str:
    """``/blog/<year>/<slug>/``."""
    return f"/blog/{year}/{slugify(title)}/"


def is_valid_slug(slug: str) -> bool:
    """Whether ``slug`` could have come out of :func:`slugify`."""
    return bool(slug) and len(slug) <= MAX_LENGTH and slugify(slug) == slug


def unique_slug(title: str, taken: set[str]) -> str:
    """``slugify(title)``, or with ``-2``, ``-3``, ... appended when it is in ``taken``."""
    base = slugify(title)
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def slug_words(slug: str) -> list[str]:
    """The words of a slug: ``"hello-world"`` -> ``["hello", "world"]``."""
    return [word for word in slug.split("-") if word]
