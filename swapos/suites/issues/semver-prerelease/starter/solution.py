"""Semantic version parsing and ordering."""

from __future__ import annotations

import re
from typing import NamedTuple

_VERSION = re.compile(
    r"^(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<pre>[0-9A-Za-z.-]+))?(?:\+(?P<build>[0-9A-Za-z.-]+))?$"
)


class Version(NamedTuple):
    major: int
    minor: int
    patch: int
    pre: str = ""
    build: str = ""


def parse(text: str) -> Version:
    """Parse ``MAJOR.MINOR.PATCH[-PRE][+BUILD]``; ValueError if it is not semver."""
    m = _VERSION.match(text.strip())
    if m is None:
        raise ValueError(f"not a semantic version: {text!r}")
    return Version(
        int(m["major"]), int(m["minor"]), int(m["patch"]), m["pre"] or "", m["build"] or ""
    )


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as version ``a`` is lower than, equal to or higher than ``b``."""
    va, vb = parse(a), parse(b)
    ka, kb = va[:3], vb[:3]
    return (ka > kb) - (ka < kb)


def sort_versions(versions: list[str]) -> list[str]:
    """``versions`` from lowest to highest."""
    import functools

    return sorted(versions, key=functools.cmp_to_key(compare))


def latest(versions: list[str]) -> str:
    """The highest of ``versions``."""
    return sort_versions(versions)[-1]
