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
    if ka != kb:
        return (ka > kb) - (ka < kb)
    return _compare_pre(va.pre, vb.pre)


def _compare_pre(a: str, b: str) -> int:
    if a == b:
        return 0
    if not a or not b:
        return 1 if not a else -1
    for x, y in zip(a.split("."), b.split(".")):
        if x == y:
            continue
        if x.isdigit() and y.isdigit():
            return 1 if int(x) > int(y) else -1
        if x.isdigit() != y.isdigit():
            return -1 if x.isdigit() else 1
        return 1 if x > y else -1
    la, lb = len(a.split(".")), len(b.split("."))
    return (la > lb) - (la < lb)


def sort_versions(versions: list[str]) -> list[str]:
    """``versions`` from lowest to highest."""
    import functools

    return sorted(versions, key=functools.cmp_to_key(compare))


def latest(versions: list[str]) -> str:
    """The highest of ``versions``."""
    return sort_versions(versions)[-1]
