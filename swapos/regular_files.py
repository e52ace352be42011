"""Opening a file only if it is a regular one, without blocking on it.

Every reader of a file that SwapOS did not write itself a moment ago uses this one rule
(model files, KV state files on disk, the page-cache probe): it opens with ``O_NONBLOCK``,
because a FIFO in a file's place would otherwise wait for a writer forever. It then looks at
what it opened and refuses anything but a regular file: a folder, a FIFO, a device or a
socket. Where asked, it does not follow a symbolic link either. The grader's sandbox
launcher keeps its own copy of the rule, since it runs as a script that imports nothing of
SwapOS.
"""

from __future__ import annotations

import os
import stat

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFile(OSError):
    """What was opened is not a regular file; ``kind`` says what it is ("a folder", "a FIFO",
    "a device", "a socket")."""

    def __init__(self, path: str | os.PathLike[str], kind: str) -> None:
        super().__init__(f"{os.fspath(path)} is {kind}, not a regular file")
        self.kind = kind


def open_regular(
    path: str | os.PathLike[str], *, follow_links: bool = True
) -> tuple[int, os.stat_result]:
    """A read-only descriptor of ``path`` and its ``fstat``, if it is a regular file. The
    caller closes the descriptor.

    Raises:
        NotRegularFile: it is something else (nothing is left open).
        OSError: it cannot be opened: missing, no permission, a link loop, or a link where
            ``follow_links`` is False (``ELOOP``).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if stat.S_ISREG(info.st_mode):
        return fd, info
    os.close(fd)
    kind = next((k for test, k in _KINDS if test(info.st_mode)), "not a regular file")
    raise NotRegularFile(path, kind)
