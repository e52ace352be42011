"""Writing files atomically: a temporary file beside the target, renamed over it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def temp_path(path: Path) -> Iterator[Path]:
    """A temporary file next to ``path`` (same filesystem: the rename is atomic), removed on
    exit unless it was renamed."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    tmp.chmod(0o644)
    try:
        yield tmp
    finally:
        tmp.unlink(missing_ok=True)
