"""Known file digests, so a model file is hashed at most once per process (or never, when
its digest is already recorded, as for the bundled models' manifest)."""

from __future__ import annotations

import threading

_known: dict[tuple[str, int, int], str] = {}
_lock = threading.Lock()


def remember_digest(path: str, size: int, mtime_ns: int, sha256: str) -> None:
    """Record the sha256 of ``path`` as it is at ``size`` and ``mtime_ns``."""
    with _lock:
        _known[(path, size, mtime_ns)] = sha256


def known_digest(path: str, size: int, mtime_ns: int) -> str | None:
    """The recorded sha256 of ``path`` at that size and mtime, if any."""
    with _lock:
        return _known.get((path, size, mtime_ns))
