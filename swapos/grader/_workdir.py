"""The grader's directory for one run (made and removed, whatever the candidate left in it,
by :mod:`swapos.tempdirs`).

Two subdirectories: ``work/`` (``solution.py`` and ``tmp/``, owned by the sandbox uid: the
candidate's only writable place) and ``tests/`` (the task's test files and ``pytest.ini``,
owned by the grader and read-only to the sandbox uid; the launcher mounts it read-only
outside the work directory).
"""

from __future__ import annotations

import itertools
import os
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
