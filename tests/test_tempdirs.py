"""Temporary directories of processes that died are swept by the next one (swapos.tempdirs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from swapos.tempdirs import STALE_AFTER_S, owned_tempdir, sweep_stale

PREFIX = "swapos-test-"


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _aged(path: Path, seconds: float) -> Path:
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def _made(parent: Path, name: str, *, age: float) -> Path:
    path = parent / name
    (path / "work").mkdir(parents=True)
    (path / "work" / "solution.py").write_text("x = 1\n")
    return _aged(path, age)


def test_a_dead_process_old_directory_is_removed_and_nothing_else(tmp_path: Path) -> None:
    dead = _dead_pid()
    old = STALE_AFTER_S + 60
    stale = _made(tmp_path, f"{PREFIX}{dead}-abc", age=old)
    fresh = _made(tmp_path, f"{PREFIX}{dead}-def", age=10)
    alive = _made(tmp_path, f"{PREFIX}{os.getppid()}-ghi", age=old)
    unnamed = _made(tmp_path, f"{PREFIX}abc-ghi", age=old)
    other = _made(tmp_path, f"swapos-other-{dead}-jkl", age=old)

    assert sweep_stale(PREFIX, parent=tmp_path) == [stale]
    assert not stale.exists()
    assert fresh.exists() and alive.exists() and unnamed.exists() and other.exists()


def test_a_link_with_a_stale_name_is_not_followed(tmp_path: Path) -> None:
    target = _made(tmp_path, "elsewhere", age=0)
    link = tmp_path / f"{PREFIX}{_dead_pid()}-lnk"
    link.symlink_to(target, target_is_directory=True)
    os.utime(link, (0, 0), follow_symlinks=False)

    assert sweep_stale(PREFIX, parent=tmp_path) == []
    assert (target / "work" / "solution.py").exists()


def test_a_killed_process_directory_is_swept_by_the_next_one(tmp_path: Path) -> None:
    """A process that makes its directory and is then SIGKILLed leaves it; the next
    ``owned_tempdir`` of the prefix removes it once it is old enough."""
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from swapos.tempdirs import owned_tempdir\n"
        f"d = owned_tempdir({PREFIX!r}, parent=Path(sys.argv[1]))\n"
        "(d / 'left.txt').write_text('x')\n"
        "print(d, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert child.returncode == -signal.SIGKILL
    left = Path(child.stdout.strip())
    assert _pid_of(left) not in (os.getpid(), None)
    assert (left / "left.txt").exists()

    mine = owned_tempdir(PREFIX, parent=tmp_path)
    assert left.exists(), "a dead process's directory is kept until it is old enough"
    _aged(left, STALE_AFTER_S + 1)
    again = owned_tempdir(PREFIX, parent=tmp_path)
    assert not left.exists()
    assert mine.exists() and again.exists()
    assert mine.name.startswith(f"{PREFIX}{os.getpid()}-")


def _pid_of(path: Path) -> int:
    return int(path.name[len(PREFIX) :].partition("-")[0])
