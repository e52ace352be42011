"""The sandboxed grader (DESIGN §7): run a task's tests against an untrusted candidate.

:func:`grade` writes the candidate (as ``solution.py``) and the task's tests into a fresh
temporary directory and runs ``python -m pytest`` there in a subprocess, through the launcher in
``_sandbox.py`` which isolates it (namespaces, read-only filesystem, rlimits, unprivileged uid;
see that module). The subprocess has its own session/process group; a wall-clock timeout kills
the whole group. The result comes from pytest's JUnit XML report, never from scraping output.

Limits of the model: the candidate runs inside the pytest process, so a deliberately adversarial
candidate can tamper with its own test run; the sandbox protects the *host*, not the score.
The work directory is on the host's temp filesystem: disk use is bounded per file
(``RLIMIT_FSIZE``) and by the timeout, not by a quota.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Literal

import msgspec

from swapos.pipeline.junit import JUnitReport, parse_junit
from swapos.pipeline.task import Task

Outcome = Literal["pass", "fail", "error", "timeout", "crash"]

_OUTPUT_TAIL_CHARS = 4000
_LAUNCHER = str(Path(__file__).with_name("_sandbox.py"))
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
    """

    address_space_bytes: int = 1 << 30
    file_size_bytes: int = 16 << 20
    open_files: int = 256
    processes: int = 64
    cpu_slack_s: int = 2


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
) -> GradeResult:
    """Run ``task``'s tests against ``candidate_source`` in a sandbox.

    Synchronous and blocking (seconds); call it from a worker thread in async code. Never
    raises for anything the candidate does: every failure is a :class:`GradeResult`.

    Args:
        task: the task whose ``tests`` are run.
        candidate_source: the full new ``solution.py``.
        timeout_s: wall-clock limit for the test run; the whole process group is then killed.
        limits: resource limits (defaults: :class:`SandboxLimits`).
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
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


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
) -> GradeResult:
    uid = _prepare_workdir(task, candidate, workdir)
    notes = [
        "session: own process group",
        f"timeout: {timeout_s:g}s wall, kills the group",
        "env: scrubbed",
    ]
    read_fd, write_fd = os.pipe()
    env = _env(workdir)
    cfg = {
        "workdir": str(workdir),
        "uid": uid,
        "keep_readable": sorted({sys.prefix, sys.base_prefix, *_site_dirs()}),
        "limits": _rlimits(limits, timeout_s, uid),
        "argv": [
            sys.executable,
            "-I",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--junitxml=report.xml",
            "-o",
            "junit_family=xunit2",
        ],
        "env": env,
        "notes_fd": write_fd,
    }
    timed_out = False
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", _LAUNCHER, json.dumps(cfg)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                env=env,
                pass_fds=[write_fd],
                start_new_session=True,
            )
        finally:
            os.close(write_fd)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        _kill_group(proc)
        launcher_notes, pidns = _read_notes(read_fd)
        notes += launcher_notes
        if pidns is not None:
            _wait_namespace_empty(pidns)
        tail = _tail(out)
    report = parse_junit(workdir / "report.xml")
    rc = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    outcome, reason = _classify(rc, timed_out, report, tail, timeout_s)
    total = report.tests if report and report.tests and outcome != "error" else static_total
    passed_n = report.passed if report else 0
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


def _read_notes(fd: int) -> tuple[list[str], str | None]:
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
        data = json.loads(b"".join(chunks) or b"null")
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("notes"), list):
        return ["sandbox launcher died before reporting"], None
    pidns = data.get("pidns")
    return [str(n) for n in data["notes"]], pidns if isinstance(pidns, str) else None


def _tail(out: IO[bytes]) -> str:
    size = out.seek(0, os.SEEK_END)
    out.seek(max(0, size - _OUTPUT_TAIL_CHARS * 2))
    return out.read().decode("utf-8", "replace")[-_OUTPUT_TAIL_CHARS:]


_SIGNALS = {
    signal.SIGXCPU: "CPU time limit exceeded",
    signal.SIGXFSZ: "file size limit exceeded",
    signal.SIGKILL: "killed",
    signal.SIGSEGV: "segmentation fault",
}


def _classify(
    rc: int, timed_out: bool, report: JUnitReport | None, tail: str, timeout_s: float
) -> tuple[Outcome, str]:
    if timed_out:
        return "timeout", f"tests did not finish within {timeout_s:g}s (killed)"
    if rc > 128:
        sig = rc - 128
        what = _SIGNALS.get(signal.Signals(sig), signal.Signals(sig).name) if sig < 65 else str(sig)
        return "crash", f"test run died: {what}"
    if report is None:
        return "crash", f"test run exited (code {rc}) without a report; see output"
    if rc == 0 and report.tests > 0 and report.failures == report.errors == 0:
        return "pass", f"all {report.tests} tests passed"
    if rc in (0, 1) and report.tests > 0:
        failed = [p for p in report.problems if p.kind != "skipped"]
        names = ", ".join(p.name.rsplit("::", 1)[-1] for p in failed[:5])
        first = _first_line(failed[0].message) if failed else ""
        return "fail", f"{len(failed)}/{report.tests} tests failed: {names}. First: {first}"
    if rc == 5 or (report.tests == 0 and not report.problems):
        return "error", "no tests were collected"
    errs = [p for p in report.problems if p.kind == "error"]
    if errs:
        detail = _error_detail(errs[0].text) or errs[0].message
        return "error", f"tests could not be collected ({errs[0].name}): {detail}"
    return "error", f"pytest exited with code {rc}: {_first_line(tail.strip()[-300:])}"


def _error_detail(text: str) -> str:
    """The last ``E   ...`` line of a pytest traceback (the exception itself)."""
    lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
    return lines[-1] if lines else ""


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else ""


def _msg(e: BaseException) -> str:
    return e.msg if isinstance(e, SyntaxError) else str(e)
