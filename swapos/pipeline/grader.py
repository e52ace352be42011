"""The sandboxed grader (DESIGN §7, docs/grader.md): run tests against an untrusted candidate.

:func:`grade` writes the candidate (as ``solution.py``) and the task's tests into a fresh
temporary directory and runs them with pytest in a subprocess, through the launcher in
``_sandbox.py`` which isolates it (namespaces, a private quota tmpfs as the work directory,
read-only filesystem, no UNIX sockets, rlimits, unprivileged uid; see that module) and the
runner ``_runner.py`` which records each test's outcome itself. The subprocess has its own
session/process group; a wall-clock timeout kills the whole group.

The verdict is the runner's one message on a socket pair (``verdict.py``): accepted only from
the runner's process, with this run's nonce, and only if every test found statically ran and
passed. Nothing is read back from the work directory, so files the candidate writes there
(a forged report, a FIFO, a symlink) cannot affect the result. The candidate still runs in
the same process as the tests: docs/grader.md lists what that leaves open.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import itertools
import json
import math
import os
import secrets
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

import msgspec

from swapos.pipeline.task import Task
from swapos.pipeline.verdict import Outcome, Verdict, classify, read_verdict, static_ids

__all__ = ["GradeResult", "Outcome", "SandboxLimits", "count_tests", "grade", "remove_tree"]

_OUTPUT_TAIL_CHARS = 4000
_HERE = str(Path(__file__).resolve().parent)
_LAUNCHER = str(Path(_HERE, "_sandbox.py"))
_RUNNER = str(Path(_HERE, "_runner.py"))
_UID_BASE = 2_000_000_000
_uid_lock = threading.Lock()
_uid_counter = itertools.count(1)


class SandboxLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Resource limits applied to the sandboxed test run.

    Attributes:
        address_space_bytes: ``RLIMIT_AS`` per process.
        file_size_bytes: ``RLIMIT_FSIZE``: the largest file (and output) it may write.
        open_files: ``RLIMIT_NOFILE``.
        processes: ``RLIMIT_NPROC``: processes of the sandbox uid (a dedicated uid when the
            grader runs as root; otherwise this many beyond what the user already runs).
        cpu_slack_s: ``RLIMIT_CPU`` is the wall-clock timeout rounded up plus this.
        disk_bytes: size of the private tmpfs the work directory becomes (all files together).
        disk_inodes: files and directories that tmpfs can hold.
    """

    address_space_bytes: int = 1 << 30
    file_size_bytes: int = 16 << 20
    open_files: int = 256
    processes: int = 64
    cpu_slack_s: int = 2
    disk_bytes: int = 64 << 20
    disk_inodes: int = 4096


class GradeResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of grading one candidate.

    Attributes:
        passed: every test passed (``outcome == "pass"``).
        tests_passed: tests that passed.
        tests_total: tests run; when pytest could not run them, the number of test functions
            found statically in the test files.
        outcome: ``pass``, ``fail`` (tests ran, some failed), ``error`` (candidate not valid
            Python, tests could not be collected/imported), ``timeout`` (wall clock exceeded),
            ``crash`` (the run died without a report: a signal, a limit, an early exit).
        reason: one line a human (or a critic model) can act on.
        duration_s: wall time of the whole grading, sandbox setup included.
        sandbox: notes on which isolation features applied or were unavailable.
        output_tail: the end of pytest's combined stdout/stderr.
    """

    passed: bool
    tests_passed: int
    tests_total: int
    outcome: Outcome
    reason: str
    duration_s: float
    sandbox: list[str]
    output_tail: str = ""


def grade(
    task: Task,
    candidate_source: str,
    *,
    timeout_s: float = 30.0,
    limits: SandboxLimits | None = None,
    cancel: threading.Event | None = None,
) -> GradeResult:
    """Run ``task``'s tests against ``candidate_source`` in a sandbox.

    Synchronous and blocking (seconds); call it from a worker thread in async code. Never
    raises for anything the candidate does: every failure is a :class:`GradeResult`.

    Args:
        task: the task whose ``tests`` are run.
        candidate_source: the full new ``solution.py``.
        timeout_s: wall-clock limit for the test run; the whole process group is then killed.
        limits: resource limits (defaults: :class:`SandboxLimits`).
        cancel: when set, the run is stopped within ~0.1 s (its whole process group killed)
            and the outcome is ``cancelled``.
    """
    start = time.monotonic()
    static_total = count_tests(task.tests)
    if importlib.util.find_spec("pytest") is None:
        return GradeResult(
            passed=False,
            tests_passed=0,
            tests_total=static_total,
            outcome="error",
            reason=f"pytest is not installed for {sys.executable}: `pip install pytest` "
            "(SwapOS grades every candidate with it)",
            duration_s=time.monotonic() - start,
            sandbox=["not run: pytest missing"],
        )
    try:
        compile(candidate_source, "solution.py", "exec")
    except (SyntaxError, ValueError) as e:
        where = f" (line {e.lineno})" if isinstance(e, SyntaxError) and e.lineno else ""
        return GradeResult(
            passed=False,
            tests_passed=0,
            tests_total=static_total,
            outcome="error",
            reason=f"candidate is not valid Python: {type(e).__name__}: {_msg(e)}{where}",
            duration_s=time.monotonic() - start,
            sandbox=["not run: candidate did not compile"],
        )
    workdir = Path(tempfile.mkdtemp(prefix="swapos-grade-"))
    try:
        return _run(
            task,
            candidate_source,
            workdir,
            timeout_s=timeout_s,
            limits=limits or SandboxLimits(),
            static_total=static_total,
            start=start,
            cancel=cancel,
        )
    finally:
        remove_tree(workdir)


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


def count_tests(tests: dict[str, str]) -> int:
    """Test functions (``test_*`` at module level or in ``Test*`` classes), found statically."""
    total = 0
    for source in tests.values():
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            bodies: list[ast.stmt] = [node]
            if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                bodies = list(node.body)
            total += sum(
                isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test")
                for n in bodies
            )
    return total


def _run(
    task: Task,
    candidate: str,
    workdir: Path,
    *,
    timeout_s: float,
    limits: SandboxLimits,
    static_total: int,
    start: float,
    cancel: threading.Event | None = None,
) -> GradeResult:
    uid = _prepare_workdir(task, candidate, workdir)
    notes = [
        "session: own process group",
        f"timeout: {timeout_s:g}s wall, kills the group",
        "env: scrubbed",
    ]
    read_fd, write_fd = os.pipe()
    host, sandbox_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    nonce = secrets.token_hex(16)
    host.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    host.send(nonce.encode())
    env = _env(workdir)
    cfg = {
        "workdir": str(workdir),
        "uid": uid,
        "keep_readable": sorted({sys.prefix, sys.base_prefix, *_site_dirs(), _HERE}),
        "limits": _rlimits(limits, timeout_s, uid),
        "quota": {"bytes": limits.disk_bytes, "inodes": limits.disk_inodes},
        "argv": [sys.executable, "-I", _RUNNER, str(sandbox_end.fileno()), *_test_files(task)],
        "env": env,
        "notes_fd": write_fd,
    }
    with host, tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", _LAUNCHER, json.dumps(cfg)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                env=env,
                pass_fds=[write_fd, sandbox_end.fileno()],
                start_new_session=True,
            )
        finally:
            os.close(write_fd)
            sandbox_end.close()
        timed_out, cancelled = _wait(proc, timeout_s, cancel)
        _kill_group(proc)
        launcher = _read_notes(read_fd)
        notes += launcher.notes
        if launcher.pidns is not None:
            _wait_namespace_empty(launcher.pidns)
        tail = _tail(out)
        verdict = read_verdict(host, nonce=nonce, pid=launcher.pid or proc.pid)
    rc = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    outcome, reason = classify(rc, timed_out, verdict, static_ids(task.tests), timeout_s=timeout_s)
    if cancelled:
        outcome, reason = "cancelled", "grading was cancelled; the test run was killed"
    counted = isinstance(verdict, Verdict) and verdict.tests and outcome != "error"
    total = len(verdict.tests) if isinstance(verdict, Verdict) and counted else static_total
    passed_n = sum(t.passed for t in verdict.tests) if isinstance(verdict, Verdict) else 0
    return GradeResult(
        passed=outcome == "pass",
        tests_passed=passed_n,
        tests_total=total,
        outcome=outcome,
        reason=reason,
        duration_s=time.monotonic() - start,
        sandbox=notes,
        output_tail=tail,
    )


def _test_files(task: Task) -> list[str]:
    return sorted({Path(name).name for name in task.tests})


def _prepare_workdir(task: Task, candidate: str, workdir: Path) -> int | None:
    """Write the run's files (flat: solution.py next to the tests); chown to the sandbox uid."""
    (workdir / "solution.py").write_text(candidate)
    for name, source in task.tests.items():
        (workdir / Path(name).name).write_text(source)
    (workdir / "pytest.ini").write_text("[pytest]\n")
    (workdir / "tmp").mkdir()
    if os.geteuid() != 0:
        return None
    uid = _next_uid()
    for path in (workdir, *workdir.rglob("*")):
        os.chown(path, uid, uid)
    return uid


def _next_uid() -> int:
    """A uid no other sandbox of this host uses now (pid-derived, with a per-process counter)."""
    with _uid_lock:
        n = next(_uid_counter)
    return _UID_BASE + (os.getpid() % 100_000) * 1000 + n % 1000


def _rlimits(limits: SandboxLimits, timeout_s: float, uid: int | None) -> dict[str, int]:
    nproc = limits.processes if uid is not None else limits.processes + _user_processes()
    return {
        "cpu": math.ceil(timeout_s) + limits.cpu_slack_s,
        "as": limits.address_space_bytes,
        "fsize": limits.file_size_bytes,
        "nofile": limits.open_files,
        "nproc": nproc,
        "core": 0,
    }


def _user_processes() -> int:
    uid = os.getuid()
    n = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                n += entry.stat().st_uid == uid
    return n


def _site_dirs() -> list[str]:
    return [p for p in sys.path if p.startswith((sys.prefix, sys.base_prefix)) and os.path.isdir(p)]


def _env(workdir: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(workdir / "tmp"),
        "USER": "sandbox",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONHASHSEED": "0",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the whole process group (it is the child's own session), then reap the child."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _wait_namespace_empty(pidns: str, deadline_s: float = 5.0) -> None:
    """Wait until no process lives in the sandbox's pid namespace.

    Killing pid 1 of a namespace makes the kernel kill the rest, but asynchronously: without
    this wait a process that left the group (``setsid``) could outlive :func:`grade` briefly.
    Zombies count as gone: they hold no resources but a pid, and the host's init reaps them.
    """
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and _in_namespace(pidns):
        time.sleep(0.01)


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


def _msg(e: BaseException) -> str:
    return e.msg if isinstance(e, SyntaxError) else str(e)
