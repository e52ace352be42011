"""The grader's cgroup: every process of one sandboxed run, bounded together, killed at once.

:func:`create_cgroup` makes a fresh child of the grader's own cgroup in each hierarchy that
is there and writable (cgroup v2, or v1's ``memory`` and ``pids`` controllers on a hybrid
host), with the run's total memory (anonymous memory, tmpfs and ``memfd`` pages, page cache
and kernel memory the kernel charges; no swap) and process count as its limits. The sandbox
launcher moves itself in first thing, so the candidate's every process is born inside and
cannot leave (the sandbox has no ``/sys`` and no write access to any cgroup). At the end
:meth:`Cgroup.kill` kills them all (``cgroup.kill``, atomic against ``fork``, or a kill loop
on v1) and waits until none is left; :meth:`Cgroup.remove` deletes the cgroups.

Without a writable cgroup (an unprivileged grader with no delegated subtree, a container
without cgroupfs) nothing is created and the notes say so; the launcher's other bounds apply.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
import time
from pathlib import Path

import msgspec

_ROOT = Path("/sys/fs/cgroup")
_counter = itertools.count(1)
_lock = threading.Lock()


class Cgroup(msgspec.Struct, kw_only=True):
    """The cgroups of one run (one per hierarchy) and what they bound.

    Attributes:
        dirs: the cgroup directories the launcher joins (their ``cgroup.procs``).
        kill_file: v2's ``cgroup.kill`` of one of them, when the kernel has it.
        memory_bounded: a memory limit applies to all the run's processes together.
        notes: what applied, for ``GradeResult.sandbox``.
    """

    dirs: list[str]
    kill_file: str | None
    memory_bounded: bool
    notes: list[str]

    def kill(self, deadline_s: float = 30.0) -> bool:
        """SIGKILL every process in the cgroups and wait until none is left (True), or
        until ``deadline_s`` passed (False: a process stuck in the kernel)."""
        if not self.dirs:
            return True
        if self.kill_file is not None:
            with contextlib.suppress(OSError):
                Path(self.kill_file).write_text("1")
        end = time.monotonic() + deadline_s
        while True:
            left = [pid for d in self.dirs for pid in _procs(d)]
            if not left:
                return True
            if time.monotonic() > end:
                return False
            if self.kill_file is None:
                for d in self.dirs:
                    _kill_members(d)
            time.sleep(0.002)

    def remove(self) -> None:
        """Delete the (empty) cgroups; never raises."""
        for d in self.dirs:
            with contextlib.suppress(OSError):
                os.rmdir(d)

    def memory_events(self) -> str | None:
        """How often the memory limit was hit, if the kernel says (``None`` when never)."""
        for d in self.dirs:
            for name, key in (("memory.events", "oom_kill"), ("memory.oom_control", "oom_kill")):
                with contextlib.suppress(OSError, ValueError):
                    for line in Path(d, name).read_text().splitlines():
                        k, _, v = line.partition(" ")
                        if k == key and int(v) > 0:
                            return f"memory limit reached: {v} process(es) OOM-killed"
        return None


def create_cgroup(*, memory_bytes: int, processes: int) -> Cgroup:
    """Fresh cgroups for one run, limited to ``memory_bytes`` and ``processes``; an empty
    :class:`Cgroup` (with a note saying why) when none can be made."""
    with _lock:
        name = f"swapos-grade-{os.getpid()}-{next(_counter)}"
    own = _own_paths()
    dirs: list[str] = []
    notes: list[str] = []
    kill_file = None
    memory = pids = False
    v2 = _v2_root()
    if v2 is not None and "" in own:
        d = _make(v2 / own[""].lstrip("/") / name, notes)
        if d is not None:
            dirs.append(str(d))
            memory = _write(d / "memory.max", str(memory_bytes))
            if memory:
                _write(d / "memory.swap.max", "0")
            pids = _write(d / "pids.max", str(processes))
            kill_file = str(d / "cgroup.kill") if (d / "cgroup.kill").exists() else None
    if not memory and "memory" in own and (_ROOT / "memory").is_dir():
        d = _make(_ROOT / "memory" / own["memory"].lstrip("/") / name, notes)
        if d is not None:
            dirs.append(str(d))
            memory = _write(d / "memory.limit_in_bytes", str(memory_bytes))
            if memory and (d / "memory.memsw.limit_in_bytes").exists():
                _write(d / "memory.memsw.limit_in_bytes", str(memory_bytes))
    if not pids and "pids" in own and (_ROOT / "pids").is_dir():
        d = _make(_ROOT / "pids" / own["pids"].lstrip("/") / name, notes)
        if d is not None:
            dirs.append(str(d))
            pids = _write(d / "pids.max", str(processes))
    if dirs:
        kill = "cgroup.kill" if kill_file else "kill loop over cgroup.procs"
        notes.append(f"cgroup: yes ({kill}; every process of the run is in it)")
    notes.append(
        f"cgroup memory: {memory_bytes} bytes for all processes together (memfd and tmpfs "
        "included, no swap)"
        if memory
        else "cgroup memory: unavailable (RLIMIT_AS per process; memfd_create denied)"
    )
    if pids:
        notes.append(f"cgroup pids: at most {processes}")
    return Cgroup(dirs=dirs, kill_file=kill_file, memory_bounded=memory, notes=notes)


def _v2_root() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted: the root (pure v2) or ``unified`` (hybrid)."""
    for root in (_ROOT, _ROOT / "unified"):
        if (root / "cgroup.procs").exists() and (root / "cgroup.controllers").exists():
            return root
    return None


def _own_paths() -> dict[str, str]:
    """Our cgroup per hierarchy: ``""`` for v2, else the v1 controller names."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                paths[c] = path
    return paths


def _make(path: Path, notes: list[str]) -> Path | None:
    try:
        path.mkdir()
    except OSError as e:
        notes.append(f"cgroup {path.parent}: cannot create a child ({e.strerror})")
        return None
    return path


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
    except OSError:
        return False
    return True


def _procs(d: str) -> list[int]:
    try:
        return [int(p) for p in Path(d, "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _kill_members(d: str) -> None:
    """SIGKILL each process of ``d`` through a pidfd taken while it is still a member, so a
    pid reused by an unrelated process after its member died is never signalled."""
    for pid in _procs(d):
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            if pid in _procs(d):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.close(fd)
