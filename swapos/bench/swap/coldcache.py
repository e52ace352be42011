"""``--cold``: drop the OS page cache before a task run, where the OS allows it.

Dropping the page cache (``sync; echo 1 > /proc/sys/vm/drop_caches``) makes the next model
load read its file from disk, as on a machine whose RAM cannot cache every model. It needs
root on Linux; elsewhere the first attempt fails, the reason is reported once, and the run
continues warm. Pages that a loaded model still maps are not dropped: resident models stay.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import anyio
import structlog

log = structlog.get_logger(__name__)

DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def drop_page_cache(path: Path = DROP_CACHES) -> str | None:
    """Flush dirty pages and drop the clean page cache. Blocking (run it in a thread).

    Returns:
        None when it was dropped, else why not.
    """
    if not path.exists():
        return f"{path} does not exist (not Linux?)"
    os.sync()
    try:
        path.write_text("1\n")
    except OSError as exc:
        return f"cannot write {path} ({exc.strerror}); run as root to use --cold"
    return None


class ColdCache:
    """Drops the page cache on request until it first fails, then stops trying.

    Args:
        notify: told (once) why the cache could not be dropped.
        path: the kernel's ``drop_caches`` file (tests pass another).
    """

    def __init__(self, notify: Callable[[str], None], path: Path = DROP_CACHES) -> None:
        self._notify = notify
        self._path = path
        self.applied = 0
        self.skipped_reason: str | None = None

    async def drop(self) -> bool:
        """Drop the page cache in a worker thread; False (and no retry) if not allowed.

        On cancellation the worker finishes its write; the call then raises.
        """
        if self.skipped_reason is not None:
            return False
        reason = await anyio.to_thread.run_sync(drop_page_cache, self._path)
        if reason is not None:
            self.skipped_reason = reason
            log.warning("bench.cold_skipped", reason=reason)
            self._notify(f"--cold skipped: {reason}")
            return False
        self.applied += 1
        return True

    def status(self) -> dict[str, object]:
        """What ``bench.json`` records: requested, how many drops applied, why not."""
        return {"requested": True, "applied": self.applied, "skipped_reason": self.skipped_reason}
