"""``regular_files.open_regular``: the one rule for opening files SwapOS did not write itself
(a regular file or nothing; never blocking on a FIFO; links followed only where asked)."""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from swapos.regular_files import NotRegularFile, open_regular


def test_a_regular_file_opens_with_its_stat(tmp_path: Path) -> None:
    f = tmp_path / "model.gguf"
    f.write_bytes(b"GGUF1234")
    fd, info = open_regular(f)
    try:
        assert os.read(fd, 4) == b"GGUF" and info.st_size == 8
    finally:
        os.close(fd)


def test_a_link_is_followed_unless_asked_not_to(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    fd, _ = open_regular(tmp_path / "link")
    os.close(fd)
    with pytest.raises(OSError) as caught:
        open_regular(tmp_path / "link", follow_links=False)
    assert caught.value.errno == errno.ELOOP


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _socket(p: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    s.close()


@pytest.mark.parametrize(
    ("make", "kind"),
    [(_fifo, "a FIFO"), (Path.mkdir, "a folder"), (_socket, "a socket")],
)
def test_anything_else_is_refused_by_name_without_blocking(
    tmp_path: Path, make: Callable[[Path], object], kind: str
) -> None:
    target = tmp_path / "thing"
    make(target)
    if kind == "a socket":  # a socket cannot be opened at all: the OS says so
        with pytest.raises(OSError):
            open_regular(target)
        return
    with pytest.raises(NotRegularFile) as caught:
        open_regular(target)  # a FIFO with no writer would block a plain open forever
    assert caught.value.kind == kind and kind in str(caught.value)


def test_a_device_is_refused() -> None:
    with pytest.raises(NotRegularFile) as caught:
        open_regular("/dev/null")
    assert caught.value.kind == "a device"
