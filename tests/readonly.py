"""A folder made read-only for real, for tests of read-only caches.

The tests run as root, whom ``chmod`` does not stop: as root the folder is bind-mounted
read-only onto itself (the kernel then refuses every write with ``EROFS``); as any other user
its permissions are dropped. Where neither works (root without ``CAP_SYS_ADMIN``) the test is
skipped, never run against a folder that is in fact writable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` (and everything under it) cannot be written while the context is open."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [path, *path.rglob("*")]}
        for p, mode in modes.items():
            p.chmod(mode & ~0o222)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("no mount(8): cannot make a folder read-only for root")
    bound = subprocess.run(
        [mount, "--bind", path, path], check=False, capture_output=True, text=True
    )
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount as root here ({bound.stderr.strip()})")
    try:
        subprocess.run(
            [mount, "-o", "remount,bind,ro", path], check=True, capture_output=True, text=True
        )
        probe = path / ".probe"
        with pytest.raises(OSError):  # the helper itself must hold: a write is refused
            probe.write_bytes(b"x")
        yield
    finally:
        subprocess.run(["umount", path], check=True, capture_output=True)
