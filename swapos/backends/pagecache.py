"""How much of a file the OS page cache holds (Linux ``mincore``), so a warm-up of a file
that is already cached costs nothing.

Reading a cached 600 MB file through costs a few hundred milliseconds of CPU, taken from the
generation it is meant to help on a small machine. ``mincore`` answers from the page tables
without touching the data.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from pathlib import Path

from swapos.regular_files import open_regular

_PAGE = mmap.PAGESIZE


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        mincore, mmap_, munmap = libc.mincore, libc.mmap, libc.munmap
    except (OSError, AttributeError):
        return None
    mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    mincore.restype = ctypes.c_int
    mmap_.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]  # fmt: skip
    mmap_.restype = ctypes.c_void_p
    munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    munmap.restype = ctypes.c_int
    return libc


_LIBC = _libc()
_MAP_FAILED = ctypes.c_void_p(-1).value


def cached_fraction(path: str | Path) -> float | None:
    """The share of ``path``'s pages in the page cache (0.0 to 1.0), or None where it cannot be
    told (no ``mincore``, an empty or unreadable file). Maps the file without reading it;
    blocking but cheap (a few milliseconds for 1 GB): call it from a worker thread anyway."""
    if _LIBC is None:
        return None
    try:
        fd, st = open_regular(path)  # a FIFO must not block
    except OSError:
        return None
    try:
        size = st.st_size
        if size == 0:
            return None
        addr = _LIBC.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            return None
        try:
            pages = (size + _PAGE - 1) // _PAGE
            vec = (ctypes.c_ubyte * pages)()
            if _LIBC.mincore(addr, size, vec) != 0:
                return None
            return (pages - bytes(vec).count(0)) / pages  # bit 0: resident; others unused
        finally:
            _LIBC.munmap(addr, size)
    except OSError:
        return None
    finally:
        os.close(fd)
