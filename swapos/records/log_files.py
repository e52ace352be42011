"""One run per event log: an earlier run's log found at a run's path is kept under another name.

A server restarted with the same ``--event-log`` (after ``kill -9``, say) and a ``swapos run``
given the same ``--out`` twice both open a path that already holds a run. Appending would put
two runs in one file, which replay refuses (and a crash's truncated last line would run into
the next run's header). So the earlier log is renamed to ``<name>.<UTC time of its last
write>`` (``events.jsonl.2026-12-07T09-55-00Z``), a name no ``events*.jsonl`` set picks up,
and the new run starts its own file at the path given.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


def kept_name(path: Path, last_write: float, taken: Callable[[Path], bool]) -> Path:
    """Where an earlier run's log at ``path`` goes: the path with the UTC time of its last
    write (``last_write``, seconds since the epoch) appended, and ``-2``, ``-3``... after it
    while that name is ``taken``."""
    stamp = time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime(last_write))
    kept = path.with_name(f"{path.name}.{stamp}")
    n = 1
    while taken(kept):
        n += 1
        kept = path.with_name(f"{path.name}.{stamp}-{n}")
    return kept


def keep_earlier_run(path: Path) -> Path | None:
    """Rename a non-empty file at ``path`` to its :func:`kept_name`; where it went, or None
    when there was nothing to keep (no file, or an empty one).

    Raises:
        OSError: the file could not be renamed (the caller then cannot start a log there).
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    if st.st_size == 0:
        return None
    kept = kept_name(path, st.st_mtime, lambda p: p.exists() or p.is_symlink())
    os.rename(path, kept)
    return kept
