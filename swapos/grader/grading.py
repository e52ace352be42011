"""The sandboxed grader (docs/grader.md): run a task's tests against an untrusted candidate.

:func:`grade` writes the candidate (as ``solution.py``) and the task's tests into a fresh
temporary directory and runs them with pytest in a subprocess, through the launcher in
``_sandbox.py`` which isolates it (namespaces, a minimal root filesystem in which only the
system libraries, the Python installation with pytest and no other package, the read-only
tests and a private quota tmpfs as the work directory exist, no UNIX sockets, rlimits,
unprivileged uid; see that module) and the runner ``_runner.py`` which records each test's
outcome itself. All its processes are in a fresh cgroup (``_cgroup.py``: their total memory
and number bounded, one kill for all) when the host allows one, and in a pid namespace; when
the run ends (or times out, or is cancelled) every one of them is dead before :func:`grade`
returns (``_teardown.py``). The directory is filled and removed by ``_workdir.py``; what of
the host the sandbox keeps (the installation, pytest's packages) is read by ``_host.py``.

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
import json
import math
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

import msgspec

from swapos.data.task import Task
from swapos.grader._cgroup import create_cgroup
from swapos.grader._host import (
    SYSTEM_DIRS,
    SYSTEM_FILES,
    environment,
    installation,
    pytest_packages,
    site_dirs,
)
from swapos.grader._teardown import Ended, wait_until_ended
from swapos.grader._workdir import prepare_workdir
from swapos.grader.verdict import (
    Outcome,
    Tampered,
    Verdict,
    classify,
    read_verdict,
    static_ids,
)
from swapos.tempdirs import owned_tempdir, remove_tree

__all__ = ["GradeResult", "Outcome", "SandboxLimits", "count_tests", "grade"]

_HERE = str(Path(__file__).resolve().parent)
_LAUNCHER = str(Path(_HERE, "_sandbox.py"))
_RUNNER = str(Path(_HERE, "_runner.py"))


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
        memory_bytes: memory of all the run's processes together (anonymous memory, tmpfs
            and ``memfd`` pages included, no swap), where a cgroup can be made
            (docs/grader.md says what bounds it elsewhere).
    """

    address_space_bytes: int = 1 << 30
    memory_bytes: int = 1 << 30
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
    refusal = _cannot_run(candidate_source)
    if refusal is not None:
        reason, note = refusal
        return GradeResult(
            passed=False,
            tests_passed=0,
            tests_total=static_total,
            outcome="error",
            reason=reason,
            duration_s=time.monotonic() - start,
            sandbox=[note],
        )
    workdir = owned_tempdir("swapos-grade-")
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


def _cannot_run(candidate_source: str) -> tuple[str, str] | None:
    """Why the tests cannot run at all (pytest missing, the candidate does not compile), as
    (reason, sandbox note); None when they can."""
    if importlib.util.find_spec("pytest") is None:
        return (
            f"pytest is not installed for {sys.executable}: `pip install pytest` "
            "(SwapOS grades every candidate with it)",
            "not run: pytest missing",
        )
    try:
        compile(candidate_source, "solution.py", "exec")
    except (SyntaxError, ValueError) as e:
        where = f" (line {e.lineno})" if isinstance(e, SyntaxError) and e.lineno else ""
        return (
            f"candidate is not valid Python: {type(e).__name__}: {_msg(e)}{where}",
            "not run: candidate did not compile",
        )
    return None


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
    uid = prepare_workdir(task, candidate, workdir)
    cgroup = create_cgroup(memory_bytes=limits.memory_bytes, processes=limits.processes)
    try:
        read_fd, write_fd = os.pipe()
        host, sandbox_end, nonce = _verdict_channel()
        cfg = _launcher_config(
            task, workdir, uid, limits, timeout_s=timeout_s, verdict_fd=sandbox_end.fileno(),
            notes_fd=write_fd,
        )  # fmt: skip
        cfg["cgroups"], cfg["memory_bounded"] = cgroup.dirs, cgroup.memory_bounded
        with host, tempfile.TemporaryFile() as out:
            try:
                proc = _launch(cfg, workdir, out, pass_fds=[write_fd, sandbox_end.fileno()])
            finally:
                os.close(write_fd)
                sandbox_end.close()
            ended = wait_until_ended(
                proc, timeout_s, cancel, notes_fd=read_fd, out=out, cgroup=cgroup
            )
            verdict = read_verdict(host, nonce=nonce, pid=ended.pid)
    finally:
        cgroup.kill()
        cgroup.remove()
    return _result(task, ended, verdict, static_total, timeout_s=timeout_s, start=start)


def _verdict_channel() -> tuple[socket.socket, socket.socket, str]:
    """The socket pair the runner reports on (host end, sandbox end) and this run's nonce,
    already sent to the sandbox end; the host end checks senders' credentials."""
    host, sandbox_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    nonce = secrets.token_hex(16)
    host.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    host.send(nonce.encode())
    return host, sandbox_end, nonce


def _launcher_config(
    task: Task,
    workdir: Path,
    uid: int | None,
    limits: SandboxLimits,
    *,
    timeout_s: float,
    verdict_fd: int,
    notes_fd: int,
) -> dict[str, object]:
    """What ``_sandbox.py`` is told (as JSON): where the run's files are, what of the host
    the sandbox may see, as whom it runs, within which limits, and the runner to exec."""
    return {
        "root": str(workdir),
        "uid": uid,
        "system_dirs": list(SYSTEM_DIRS),
        "files": list(SYSTEM_FILES),
        "keep_readable": installation(),
        "site_dirs": site_dirs(),
        "packages": pytest_packages(),
        "runner": _RUNNER,
        "python": sys.executable,
        "tests": _test_files(task),
        "limits": _rlimits(limits, timeout_s, uid),
        "quota": {"bytes": limits.disk_bytes, "inodes": limits.disk_inodes},
        "env": environment(),
        "notes_fd": notes_fd,
        "verdict_fd": verdict_fd,
    }


def _launch(
    cfg: dict[str, object], workdir: Path, out: IO[bytes], *, pass_fds: list[int]
) -> subprocess.Popen[bytes]:
    """Start the launcher in its own session, its output (stdout and stderr) to ``out``."""
    return subprocess.Popen(
        [sys.executable, "-I", _LAUNCHER, json.dumps(cfg)],
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd=workdir / "work",
        env=environment(),
        pass_fds=pass_fds,
        start_new_session=True,
    )


def _result(
    task: Task,
    ended: Ended,
    verdict: Verdict | Tampered | None,
    static_total: int,
    *,
    timeout_s: float,
    start: float,
) -> GradeResult:
    """The grade: the verdict classified against the tests found statically."""
    outcome, reason = classify(
        ended.returncode, ended.timed_out, verdict, static_ids(task.tests), timeout_s=timeout_s
    )
    if ended.cancelled:
        outcome, reason = "cancelled", "grading was cancelled; the test run was killed"
    oom = next((n for n in ended.notes if n.startswith("memory limit reached")), None)
    if oom is not None and outcome != "pass":
        reason = f"{reason} ({oom}: the candidate used more than memory_bytes)"
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
        sandbox=ended.notes,
        output_tail=ended.output_tail,
    )


def _test_files(task: Task) -> list[str]:
    return sorted({Path(name).name for name in task.tests})


def _rlimits(limits: SandboxLimits, timeout_s: float, uid: int | None) -> dict[str, int]:
    nproc = limits.processes if uid is not None else limits.processes + _user_processes()
    return {
        "cpu": math.ceil(timeout_s) + limits.cpu_slack_s,
        "as": limits.address_space_bytes,
        "fsize": limits.file_size_bytes,
        "nofile": limits.open_files,
        "nproc": nproc,
        "core": 0,
        "msgqueue": 0,
    }


def _user_processes() -> int:
    uid = os.getuid()
    n = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                n += entry.stat().st_uid == uid
    return n


def _msg(e: BaseException) -> str:
    return e.msg if isinstance(e, SyntaxError) else str(e)
