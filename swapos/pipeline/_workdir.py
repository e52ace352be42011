"""The grader's directory for one run, then removed whatever the candidate left in it.

Two subdirectories: ``work/`` (``solution.py`` and ``tmp/``, owned by the sandbox uid: the
candidate's only writable place) and ``tests/`` (the task's test files and ``pytest.ini``,
owned by the grader and read-only to the sandbox uid; the launcher mounts it read-only
outside the work directory).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import stat
import threading
from pathlib import Path

from swapos.data.task import Task

_UID_BASE = 2_000_000_000
_uid_lock = threading.Lock()
_uid_counter = itertools.count(1)


def prepare_workdir(task: Task, candidate: str, root: Path) -> int | None:
    """Write the run's files under ``root`` (``work/solution.py``, ``work/tmp/``, flat
    ``tests/``); give ``work/`` to the sandbox uid (returned when the grader is root)."""
    work, tests = root / "work", root / "tests"
    work.mkdir()
    tests.mkdir(mode=0o755)
    (work / "solution.py").write_text(candidate)
    (work / "tmp").mkdir()
    for name, source in task.tests.items():
        (tests / Path(name).name).write_text(source)
    (tests / "pytest.ini").write_text("[pytest]\n")
    root.chmod(0o755)
    if os.geteuid() != 0:
        return None
    uid = _next_uid()
    for path in (work, *work.rglob("*")):
        os.chown(path, uid, uid)
    return uid


def _next_uid() -> int:
    """A uid no other sandbox of this host uses now (pid-derived, with a per-process counter)."""
    with _uid_lock:
        n = next(_uid_counter)
    return _UID_BASE + (os.getpid() % 100_000) * 1000 + n % 1000


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
