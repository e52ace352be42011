"""Page-cache residency of a file (swapos/backends/pagecache.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from swapos.backends.pagecache import cached_fraction


def test_a_file_just_read_is_cached(tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(os.urandom(1 << 20))
    path.read_bytes()
    fraction = cached_fraction(path)
    if fraction is None:
        pytest.skip("mincore is not available here")
    assert fraction == 1.0


def test_a_file_dropped_from_the_cache_is_not_fully_cached(tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(os.urandom(4 << 20))
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # this file only, not the machine's
    finally:
        os.close(fd)
    fraction = cached_fraction(path)
    if fraction is None:
        pytest.skip("mincore is not available here")
    if fraction == 1.0:
        pytest.skip("this filesystem keeps files in memory (tmpfs): nothing to drop")
    assert fraction < 1.0


def test_what_cannot_be_told_is_none(tmp_path: Path) -> None:
    assert cached_fraction(tmp_path / "missing.bin") is None
    (tmp_path / "empty.bin").touch()
    assert cached_fraction(tmp_path / "empty.bin") is None
