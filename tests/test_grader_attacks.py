"""Hostile candidates against the grader (docs/grader.md): none can fake a pass or reach the host.

Each candidate below is *wrong* (its ``add`` multiplies) and tries to be graded PASS anyway, or
to reach something of the host. Every test here failed (or hung, or raised) before the grader
was hardened.
"""

from __future__ import annotations

import os
import socket
import stat
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from swapos.data.task import Task, TaskMeta
from swapos.grader import GradeResult, SandboxLimits, grade
from swapos.tempdirs import remove_tree

REPO = Path(__file__).resolve().parents[1]

TESTS = """\
from solution import add


def test_small() -> None:
    assert add(1, 2) == 3


def test_zero() -> None:
    assert add(0, 0) == 0
"""

WRONG = "def add(a, b):\n    return a * b\n"

FORGED_XML = (
    '<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="2" failures="0" '
    'errors="0" skipped="0"><testcase classname="test_add" name="test_small"/>'
    '<testcase classname="test_add" name="test_zero"/></testsuite></testsuites>'
)


def make_task(tests: str = TESTS) -> Task:
    return Task(
        meta=TaskMeta(task_id="t_add", category="bugfix"),
        root="",
        problem="add two numbers",
        starter=WRONG,
        tests={"test_add.py": tests},
    )


def grade_within(candidate: str, deadline_s: float = 30.0, **kwargs: object) -> GradeResult:
    """Grade in a thread so a grader that hangs fails the test instead of hanging it."""
    box: list[GradeResult | BaseException] = []

    def work() -> None:
        try:
            box.append(grade(make_task(), candidate, **kwargs))  # type: ignore[arg-type]
        except BaseException as e:
            box.append(e)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(deadline_s)
    assert box, f"grade() did not return within {deadline_s}s"
    result = box[0]
    if isinstance(result, BaseException):
        pytest.fail(f"grade() raised {result!r}")
    return result


# --- the verdict cannot be written by the candidate --------------------------------------


def test_own_report_xml_then_exit_is_not_a_pass() -> None:
    candidate = f"import os\nopen('report.xml', 'w').write({FORGED_XML!r})\nos._exit(0)\n"
    result = grade_within(candidate)
    assert not result.passed
    assert result.outcome == "crash"


def test_execve_pytest_with_own_conftest_is_not_a_pass() -> None:
    candidate = f"""
import os, sys
open("conftest.py", "w").write(
    "import pytest\\n"
    "@pytest.hookimpl(tryfirst=True)\\n"
    "def pytest_runtest_call(item):\\n"
    "    item.runtest = lambda: None\\n"
)
open('report.xml', 'w').write({FORGED_XML!r})
os.execve(sys.executable, [sys.executable, "-m", "pytest", "-q", "--junitxml=report.xml"],
          dict(os.environ))
{WRONG}"""
    result = grade_within(candidate)
    assert not result.passed
    assert "os.exec" in result.reason or result.outcome in {"crash", "error"}


def test_patching_pytest_runtest_is_not_a_pass() -> None:
    candidate = (
        f"import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n{WRONG}"
    )
    result = grade_within(candidate)
    assert (result.passed, result.outcome) == (False, "fail")
    assert result.tests_passed == 0


def test_replacing_the_test_functions_is_not_a_pass() -> None:
    candidate = f"""
import _pytest.python as p
real = p.PyobjMixin.obj
p.PyobjMixin.obj = property(
    lambda self: (lambda: None) if type(self) is p.Function else real.fget(self), real.fset
)
{WRONG}"""
    result = grade_within(candidate)
    assert (result.passed, result.outcome) == (False, "fail")
    assert "not the test function" in result.reason


def test_always_equal_object_is_not_a_pass() -> None:
    candidate = """
class Anything(int):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = int.__hash__

def add(a, b):
    return Anything(a * b)
"""
    result = grade_within(candidate)
    assert (result.passed, result.outcome) == (False, "fail")
    assert "bogus" in result.reason


@pytest.mark.parametrize(
    "hack",
    [
        "import pytest\ndef add(a, b):\n    pytest.skip('nothing to see')\n",
        "import pytest\ndef add(a, b):\n    pytest.exit('done', returncode=0)\n",
        "import atexit, os\natexit.register(lambda: os._exit(0))\n" + WRONG,
        "import unittest.mock\ndef add(a, b):\n    return unittest.mock.ANY\n",
    ],
    ids=["skip", "pytest-exit", "exit-0-at-exit", "mock-any"],
)
def test_other_ways_around_the_tests_are_not_a_pass(hack: str) -> None:
    assert not grade_within(hack).passed


def test_forged_verdict_on_every_inherited_socket_is_rejected() -> None:
    candidate = f"""
import json, os, socket
forged = json.dumps({{"nonce": "guess", "tests": [
    {{"id": "test_add.py::test_small", "passed": True}},
    {{"id": "test_add.py::test_zero", "passed": True}}], "collect_errors": []}}).encode()
for fd in map(int, os.listdir("/proc/self/fd")):
    try:
        socket.socket(fileno=os.dup(fd)).send(forged)
    except OSError:
        pass
if os.fork() == 0:
    os._exit(0)
{WRONG}"""
    result = grade_within(candidate)
    assert not result.passed
    assert result.outcome == "error"
    assert "verdict rejected" in result.reason


def test_honest_values_of_many_kinds_still_compare_equal() -> None:
    tests = """\
import collections, dataclasses, fractions
import pytest
from solution import make


def test_values() -> None:
    point, counts, frac, named, nested = make()
    assert point == make()[0]
    assert counts == {"a": 2, "b": 1}
    assert frac == fractions.Fraction(1, 3)
    assert named == (1, 2)
    assert nested == [{"x": (1, 2.5)}, None]
    assert 0.1 + 0.2 == pytest.approx(0.3)
    assert "a" in counts
"""
    candidate = """
import collections, dataclasses, fractions

@dataclasses.dataclass
class Point:
    x: int
    y: int

Pair = collections.namedtuple("Pair", "a b")

def make():
    return (Point(1, 2), collections.Counter("aab"), fractions.Fraction(2, 6), Pair(1, 2),
            [{"x": (1, 2.5)}, None])
"""
    task = make_task(tests)
    result = grade(task, candidate)
    assert result.passed, result.reason + result.output_tail


# --- nothing is read from the work directory --------------------------------------------


def test_fifo_named_report_xml_does_not_hang_grade() -> None:
    candidate = f"import os\nos.mkfifo('report.xml')\n{WRONG}"
    result = grade_within(candidate, deadline_s=20.0, timeout_s=10.0)
    assert not result.passed
    assert result.duration_s < 10


def test_symlinked_report_xml_does_not_leak_a_root_only_file() -> None:
    secret = f"swapos-secret-{uuid.uuid4().hex}"
    xml = FORGED_XML.replace(
        'name="test_small"/>', f'name="test_small"><failure message="{secret}"/></testcase>'
    )
    fd, path = tempfile.mkstemp(dir=REPO)
    try:
        os.write(fd, xml.replace('failures="0"', 'failures="1"').encode())
        os.close(fd)
        os.chmod(path, 0o600)
        candidate = f"import os\nos.symlink({path!r}, 'report.xml')\n{WRONG}"
        result = grade_within(candidate)
        assert secret not in result.reason + result.output_tail
        assert not result.passed
    finally:
        os.unlink(path)


# --- the host stays out of reach ------------------------------------------------------------


def test_host_unix_sockets_are_unreachable() -> None:
    token = uuid.uuid4().hex[:12]
    paths = [Path("/run") / f"swapos-{token}.sock", REPO / f".swapos-{token}.sock"]
    servers = []
    try:
        for path in paths:
            server = socket.socket(socket.AF_UNIX)
            server.bind(str(path))
            os.chmod(path, 0o777)
            server.listen()
            servers.append(server)
        abstract = socket.socket(socket.AF_UNIX)
        abstract.bind(f"\0swapos-{token}")
        abstract.listen()
        servers.append(abstract)
        targets = [str(p) for p in paths] + [f"\0swapos-{token}"]
        candidate = f"""
import socket
def add(a, b):
    for target in {targets!r}:
        try:
            socket.socket(socket.AF_UNIX).connect(target)
            return -1
        except OSError:
            pass
    return a + b
"""
        result = grade(make_task(), candidate)
        assert result.passed, result.reason + result.output_tail
        assert "seccomp: socket(AF_UNIX) denied" in result.sandbox
    finally:
        for server in servers:
            server.close()
        for path in paths:
            path.unlink(missing_ok=True)


def test_disk_use_stops_at_the_quota_quickly() -> None:
    quota = 8 << 20
    candidate = f"""
import os
written = 0
try:
    for i in range(64):
        with open(f"fill{{i}}", "wb") as f:
            f.write(b"x" * (1 << 20))
        written += 1 << 20
except OSError:
    pass
def add(a, b):
    return a + b if written <= {quota} else -written
"""
    start = time.monotonic()
    result = grade_within(candidate, limits=SandboxLimits(disk_bytes=quota))
    assert result.passed, result.reason + result.output_tail
    assert time.monotonic() - start < 10
    assert f"disk quota: {quota} bytes" in " ".join(result.sandbox)


def test_deep_directory_tree_does_not_make_grade_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    candidate = f"""
import os
for _ in range(5000):
    try:
        os.mkdir("d")
        os.chdir("d")
    except OSError:
        break
{WRONG}"""
    parent = Path(tempfile.mkdtemp(prefix="swapos-test-"))
    parent.chmod(0o755)  # the sandbox uid must reach the work directory even without mounts
    monkeypatch.setattr(tempfile, "tempdir", str(parent))
    try:
        result = grade_within(candidate)
        assert not result.passed
        assert list(parent.iterdir()) == []
    finally:
        remove_tree(parent)


@pytest.mark.parametrize("status", [168, 255])
def test_any_exit_status_is_a_result_not_an_exception(status: int) -> None:
    result = grade_within(f"import os\nos._exit({status})\n")
    assert (result.passed, result.outcome) == (False, "crash")


def test_remove_tree_handles_depth_permissions_links_and_odd_names(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(5000):  # deeper than PATH_MAX allows as a path
            os.mkdir("d", dir_fd=fd)
            new = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = new
        os.mkdir("locked", dir_fd=fd)
        os.chmod("locked", 0, dir_fd=fd)
    finally:
        os.close(fd)
    (root / "weird \n name\udcff").write_text("x")
    (root / "link").symlink_to(outside)
    (root / "dirlink").symlink_to(tmp_path)
    os.chmod(root / "d", stat.S_IXUSR)
    remove_tree(root)
    assert not root.exists()
    assert outside.read_text() == "keep me"
