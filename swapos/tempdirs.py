"""Temporary directories a process owns, and what a process that died left of them.

A grade's directory or a cluster worker's log folder is removed when its run ends; a process
killed meanwhile (SIGKILL, an out-of-memory kill, a Ray worker torn down, the machine gone)
cannot, and its directories stayed in the temp folder for good. So each such directory is
named after the process that made it (``<prefix><pid>-<random>``), and making one first
removes those of its prefix whose process is gone and that are old enough not to belong to a
process of another pid namespace sharing the folder (:data:`STALE_AFTER_S`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
import time
from pathlib import Path

STALE_AFTER_S = 3600.0
"""A dead process's directory is removed only once it is this old (seconds since its last
change): a process of another pid namespace sharing the temp folder looks dead from here, and
no grade or worker run keeps a directory unchanged for an hour."""


def owned_tempdir(prefix: str, *, parent: Path | None = None) -> Path:
    """A new directory ``<prefix><pid>-<random>`` in ``parent`` (the temp folder), after
    removing the stale ones of the same prefix (:func:`sweep_stale`)."""
    where = parent or Path(tempfile.gettempdir())
    sweep_stale(prefix, parent=where)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=where))


def sweep_stale(prefix: str, *, parent: Path | None = None, now: float | None = None) -> list[Path]:
    """Remove the directories ``<prefix><pid>-*`` of ``parent`` whose process is not running
    and that have not changed for :data:`STALE_AFTER_S`; the ones removed. Never raises."""
    where = parent or Path(tempfile.gettempdir())
    now = time.time() if now is None else now
    removed = []
    with contextlib.suppress(OSError):
        for path in where.glob(f"{prefix}*-*"):
            pid = _owner_pid(path.name[len(prefix) :])
            if pid is None or _running(pid) or not path.is_dir() or path.is_symlink():
                continue
            with contextlib.suppress(OSError):
                if now - path.lstat().st_mtime < STALE_AFTER_S:
                    continue
                remove_tree(path)
                removed.append(path)
    return removed


def _owner_pid(rest: str) -> int | None:
    """The pid a directory's name after its prefix starts with (``1234-abcd``), if any."""
    head, _, _ = rest.partition("-")
    return int(head) if head.isdigit() else None


def _running(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's counts too)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def remove_tree(root: Path) -> None:
    """Delete ``root`` and everything under it; never raises, never follows a link.

    Iterative and fd-relative, so depth (thousands of nested directories), path length,
    directories without permissions and odd names do not matter: each subdirectory's entries
    are moved up to ``root`` level (``rename``) before it is removed.
    """
    try:
        rootfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        for _ in range(100_000):
            if not _prune_level(rootfd):
                break
    except OSError:
        pass  # the root itself became unreadable: leave what is left
    finally:
        os.close(rootfd)
    with contextlib.suppress(OSError):
        os.rmdir(root)


def _prune_level(rootfd: int) -> bool:
    """Remove files at ``rootfd`` level and lift one level of subdirectories; False when empty
    or when nothing more can be done."""
    progress = False
    for name in os.listdir(rootfd):
        with contextlib.suppress(OSError):
            _remove_or_lift(rootfd, name)
            progress = True
    return progress


def _remove_or_lift(rootfd: int, name: str) -> None:
    st = os.stat(name, dir_fd=rootfd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=rootfd)
        return
    with contextlib.suppress(OSError):
        os.chmod(name, 0o700, dir_fd=rootfd)
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=rootfd)
    try:
        for child in os.listdir(fd):
            os.rename(child, secrets.token_hex(8), src_dir_fd=fd, dst_dir_fd=rootfd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=rootfd)
