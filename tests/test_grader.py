"""The sandboxed grader: outcomes, counts, and containment of hostile candidates."""

from __future__ import annotations

import os
import socket
import tempfile
import uuid
from pathlib import Path

import pytest

from swapos.data.task import Task, TaskMeta
from swapos.grader import GradeResult, count_tests, grade

REPO = Path(__file__).resolve().parents[1]

TESTS = """\
from solution import add


def test_small() -> None:
    assert add(1, 2) == 3


def test_zero() -> None:
    assert add(0, 0) == 0
"""

GOOD = "def add(a, b):\n    return a + b\n"


def make_task(tests: str = TESTS) -> Task:
    return Task(
        meta=TaskMeta(task_id="t_add", category="bugfix"),
        root="",
        problem="add two numbers",
        starter="def add(a, b):\n    return a - b\n",
        tests={"test_add.py": tests},
    )


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry.name))
    return found


def test_correct_candidate_passes_and_temp_dir_is_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(*args: object, **kwargs: object) -> str:
        made.append(real_mkdtemp(*args, **kwargs))  # type: ignore[call-overload]
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    result = grade(make_task(), GOOD)
    assert isinstance(result, GradeResult)
    assert (result.passed, result.outcome) == (True, "pass")
    assert (result.tests_passed, result.tests_total) == (2, 2)
    assert "session: own process group" in result.sandbox
    assert len(made) == 1
    assert not Path(made[0]).exists()


def test_wrong_candidate_fails_with_counts_and_reason() -> None:
    result = grade(make_task(), "def add(a, b):\n    return a * b\n")
    assert (result.passed, result.outcome) == (False, "fail")
    assert (result.tests_passed, result.tests_total) == (1, 2)
    assert "test_small" in result.reason


def test_hanging_candidate_times_out_and_its_processes_are_gone() -> None:
    marker = f"swapos-hang-{uuid.uuid4().hex}"
    candidate = f"""
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)  # {marker}"])
subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(1000)  # {marker}"], start_new_session=True
)
def add(a, b):
    while True:
        pass
"""
    result = grade(make_task(), candidate, timeout_s=3.0)
    assert result.outcome == "timeout"
    assert not result.passed
    assert result.duration_s < 10
    assert _processes_with(marker) == []


def test_spawning_many_processes_is_contained_and_fails() -> None:
    marker = f"swapos-spawn-{uuid.uuid4().hex}"
    candidate = f"""
import subprocess, sys
def add(a, b):
    procs = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)  # {marker}"])
        for _ in range(500)
    ]
    return a + b
"""
    result = grade(make_task(), candidate, timeout_s=20.0)
    assert result.outcome in {"fail", "error", "crash", "timeout"}
    assert not result.passed
    assert _processes_with(marker) == []


def test_fork_bomb_is_contained() -> None:
    candidate = "import os\nwhile True:\n    os.fork()\n" + GOOD
    result = grade(make_task(), candidate, timeout_s=4.0)
    assert result.outcome in {"timeout", "error", "crash"}
    assert result.duration_s < 15


def test_memory_hungry_candidate_fails() -> None:
    candidate = (
        "def add(a, b):\n    block = bytearray(8 * 1024**3)\n    return a + b + 0 * len(block)\n"
    )
    result = grade(make_task(), candidate, timeout_s=20.0)
    assert result.outcome in {"fail", "crash"}
    assert not result.passed
    assert "MemoryError" in result.output_tail or result.outcome == "crash"


def test_writes_outside_the_work_directory_do_not_land() -> None:
    token = uuid.uuid4().hex
    targets = [
        Path(tempfile.gettempdir()) / f"escape_{token}",
        Path("/tmp") / f"escape_{token}",
        REPO / f"escape_{token}",
        Path.home() / f"escape_{token}",
    ]
    candidate = f"""
import os
for path in {[str(t) for t in targets]!r}:
    try:
        with open(path, "w") as f:
            f.write("escaped")
    except OSError:
        pass
{GOOD}"""
    try:
        result = grade(make_task(), candidate)
        assert result.passed, result.output_tail
        assert [t for t in targets if t.exists()] == []
    finally:
        for t in targets:
            t.unlink(missing_ok=True)


def test_network_is_unreachable_when_a_network_namespace_applies() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        candidate = f"""
import socket
def add(a, b):
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    except OSError:
        return a + b
    return -1
"""
        result = grade(make_task(), candidate)
    if "netns: yes" not in result.sandbox:
        pytest.skip("no network namespace on this machine: " + "; ".join(result.sandbox))
    assert result.passed, result.output_tail


def test_syntax_error_is_an_error_with_known_total() -> None:
    result = grade(make_task(), "def add(a, b)\n    return a + b\n")
    assert result.outcome == "error"
    assert "not valid Python" in result.reason
    assert "line 1" in result.reason
    assert result.tests_total == 2


def test_a_candidate_with_a_null_byte_is_refused_before_any_sandbox_starts() -> None:
    result = grade(make_task(), "def add(a, b):\n    return a + b\x00\n")
    assert result.outcome == "error" and not result.passed
    assert result.reason.startswith("candidate is not valid Python: ")
    assert result.sandbox == ["not run: candidate did not compile"]
    assert result.tests_total == 2


def test_test_file_that_cannot_import_is_an_error() -> None:
    result = grade(make_task(), "def subtract(a, b):\n    return a - b\n")
    assert result.outcome == "error"
    assert "ImportError" in result.reason
    assert result.tests_total == 2


def test_broken_test_file_is_an_error() -> None:
    result = grade(make_task("from solution import add\ndef test_x(:\n"), GOOD)
    assert result.outcome == "error"
    assert not result.passed


def test_early_exit_without_report_is_not_a_pass() -> None:
    result = grade(make_task(), "import os\nos._exit(0)\n")
    assert result.outcome == "crash"
    assert not result.passed


def test_count_tests_finds_functions_and_methods() -> None:
    source = "def test_a(): pass\nclass TestB:\n    def test_c(self): pass\ndef helper(): pass\n"
    assert count_tests({"test_x.py": source, "test_bad.py": "def ("}) == 2


def test_missing_pytest_is_a_clear_error_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pytest" else real(name, *a)
    )
    from swapos.data.task import Task, TaskMeta
    from swapos.grader import grade

    task = Task(
        meta=TaskMeta(task_id="t", category="bugfix"),
        root="",
        problem="",
        starter="",
        tests={"test_x.py": "def test_x():\n    assert True\n"},
    )
    result = grade(task, "x = 1\n")
    assert result.outcome == "error" and "pip install pytest" in result.reason


def test_a_failures_feedback_is_the_same_text_in_every_run() -> None:
    """What the critic and the fixer read of a failed grade has no wall times and no memory
    addresses (pytest prints ``<function add at 0x7f...>``), so a rerun's prompts repeat."""
    from swapos.pipeline.steps import feedback_text

    tests = "from solution import add\n\n\ndef check(f):\n    assert f(1, 2) == 3\n\n\n"
    tests += "def test_add() -> None:\n    check(add)\n"
    runs = [grade(make_task(tests), "def add(a, b):\n    return a * b\n") for _ in range(2)]
    assert all(" at 0x" in r.output_tail for r in runs)  # pytest shows the function's address
    first, second = (feedback_text(r) for r in runs)
    assert first == second
    assert "f = <function add>" in first and "assert 2 == 3" in first
