"""Ending a sandboxed run, seen from the host: wait for it (or its timeout, or a cancel),
kill every process it started, wait until none is left, and collect what the launcher
reported and the tail of its output.

The kill does not rely on the process group (the candidate can leave it with ``setsid``):
with a cgroup, ``cgroup.kill`` (or a kill loop) ends every process in it and the wait is on
the cgroup being empty; with a pid namespace, killing the launcher kills its pid 1 (the
parent-death signal) and so the whole namespace, and the wait is on the namespace being
empty. Only with neither (docs/grader.md) is the process group all there is."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from typing import IO

import msgspec

from swapos.grader._cgroup import Cgroup

_OUTPUT_TAIL_CHARS = 4000
_GONE_DEADLINE_S = 30.0  # SIGKILL is final; only a process stuck in the kernel takes longer


class Ended(msgspec.Struct, frozen=True, kw_only=True):
    """How the sandboxed run ended, as seen from the host."""

    timed_out: bool
    cancelled: bool
    returncode: int
    """The exit status; 128 + n for a death by signal n."""
    pid: int
    """The runner's pid as the launcher reported it (else the launcher's)."""
    notes: list[str]
    output_tail: str


def wait_until_ended(
    proc: subprocess.Popen[bytes],
    timeout_s: float,
    cancel: threading.Event | None,
    *,
    notes_fd: int,
    out: IO[bytes],
    cgroup: Cgroup | None = None,
) -> Ended:
    """Wait for the run (or its timeout, or ``cancel``), then kill every process of it and
    wait until none is left; the launcher's notes and the output's tail."""
    timed_out, cancelled = _wait(proc, timeout_s, cancel)
    gone = cgroup.kill(_GONE_DEADLINE_S) if cgroup is not None and cgroup.dirs else None
    _kill_group(proc)
    launcher = _read_notes(notes_fd)
    if launcher.pidns is not None:
        gone = _wait_namespace_empty(launcher.pidns, _GONE_DEADLINE_S) and gone is not False
    how = _kill_note(cgroup, launcher.pidns is not None, gone)
    oom = cgroup.memory_events() if cgroup is not None else None
    return Ended(
        timed_out=timed_out,
        cancelled=cancelled,
        returncode=proc.returncode if proc.returncode >= 0 else 128 - proc.returncode,
        pid=launcher.pid or proc.pid,
        notes=[
            "session: own process group",
            f"timeout: {timeout_s:g}s wall, then {how}",
            "env: scrubbed",
            *(cgroup.notes if cgroup is not None else []),
            *launcher.notes,
            *([oom] if oom else []),
        ],
        output_tail=_tail(out),
    )


def _wait(
    proc: subprocess.Popen[bytes], timeout_s: float, cancel: threading.Event | None
) -> tuple[bool, bool]:
    """Wait for the run to end: (timed out, cancelled). Polls ``cancel`` every 0.1 s."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return True, False
        try:
            proc.wait(timeout=min(left, 0.1) if cancel is not None else left)
        except subprocess.TimeoutExpired:
            if cancel is not None and cancel.is_set():
                return False, True
            continue
        return False, False


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the whole process group (it is the child's own session), then reap the child."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _kill_note(cgroup: Cgroup | None, pidns: bool, gone: bool | None) -> str:
    if cgroup is not None and cgroup.dirs:
        how = "cgroup.kill" if cgroup.kill_file else "kills every process of the cgroup"
    elif pidns:
        how = "kills pid 1 of the pid namespace (and so all of it)"
    else:
        how = "kills the process group only (no cgroup, no pid namespace)"
    if gone is False:
        how += "; some processes were still exiting when grading gave up waiting"
    return how


def _wait_namespace_empty(pidns: str, deadline_s: float) -> bool:
    """Wait until no process lives in the sandbox's pid namespace (True), or ``deadline_s``.

    Killing pid 1 of a namespace makes the kernel kill the rest, but asynchronously: without
    this wait a process that left the group (``setsid``) could outlive :func:`grade` briefly.
    Zombies count as gone: they hold no resources but a pid, and the host's init reaps them.
    """
    end = time.monotonic() + deadline_s
    while _in_namespace(pidns):
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def _in_namespace(pidns: str) -> bool:
    with os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    ns = os.readlink(f"/proc/{entry.name}/ns/pid")
                    if ns == pidns and not _zombie(entry.name):
                        return True
    return False


def _zombie(pid: str) -> bool:
    """A dead process not yet reaped (its parent, the killed launcher, is gone; init reaps it)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[-1].split()[0] == b"Z"


class _LauncherReport(msgspec.Struct, frozen=True, kw_only=True):
    notes: list[str]
    pidns: str | None = None
    pid: int | None = None


def _read_notes(fd: int) -> _LauncherReport:
    """The launcher's notes (written once, just before ``exec``), read without blocking."""
    os.set_blocking(fd, False)
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    try:
        return msgspec.json.decode(b"".join(chunks), type=_LauncherReport)
    except msgspec.DecodeError:
        return _LauncherReport(notes=["sandbox launcher died before reporting"])


def _tail(out: IO[bytes]) -> str:
    size = out.seek(0, os.SEEK_END)
    out.seek(max(0, size - _OUTPUT_TAIL_CHARS * 2))
    return out.read().decode("utf-8", "replace")[-_OUTPUT_TAIL_CHARS:]
