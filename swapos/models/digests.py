"""File digests: computed at most once per file version per process, or never when already
recorded (as for the bundled models' manifest)."""

from __future__ import annotations

import hashlib
import os
import threading

_known: dict[tuple[str, int, int], str] = {}
_lock = threading.Lock()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """sha256 of the file at ``path``, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def remember_digest(path: str, size: int, mtime_ns: int, sha256: str) -> None:
    """Record the sha256 of ``path`` as it is at ``size`` and ``mtime_ns``."""
    with _lock:
        _known[(path, size, mtime_ns)] = sha256


def known_digest(path: str, size: int, mtime_ns: int) -> str | None:
    """The recorded sha256 of ``path`` at that size and mtime, if any."""
    with _lock:
        return _known.get((path, size, mtime_ns))


def file_digest(path: str) -> str:
    """sha256 of ``path`` as it is now: the recorded one, else computed and recorded."""
    stat = os.stat(path)
    key = (path, stat.st_size, stat.st_mtime_ns)
    known = known_digest(*key)
    if known is None:
        known = sha256_file(path)
        remember_digest(*key, known)
    return known
