"""The grader's in-sandbox pytest runner: records each test's outcome itself (docs/grader.md).

Run as a script (``python -I _runner.py FD WORKDIR TEST_FILE...``) by the sandbox launcher;
stdlib and pytest only, never imported by the grader. ``FD`` is one end of a ``SOCK_SEQPACKET``
socket pair whose other end the grader holds; ``WORKDIR`` holds the candidate's
``solution.py`` and goes at the *end* of ``sys.path`` (so nothing the candidate writes there
shadows a module of the standard library or pytest); the test files live elsewhere, in a
directory the candidate cannot write, which is pytest's rootdir and ``confcutdir`` (so no
``conftest.py`` or ini file of the candidate's is ever read). Before anything of the
candidate is imported, this script:

1. reads the per-run nonce the grader sent on ``FD`` and makes ``FD`` close-on-exec;
2. makes the process non-dumpable, so other processes of the sandbox uid can neither ptrace it
   nor open its ``/proc/PID/mem`` or ``/proc/PID/fd``;
3. captures pytest's own ``pytest_pyfunc_call``; when collection starts (it imports the
   candidate) it installs an audit hook that refuses to replace the process image
   (``os.exec*``, ``os.posix_spawn``), ctypes, ``/proc/*/mem``, and the ``gc`` reflection calls;
4. registers a plugin (before collection) that runs each test function through the captured
   ``pytest_pyfunc_call``, records whether it *returned*, checks the operands of every
   comparison in the tests' ``assert`` statements for bogus equality, and at the end of the
   session sends ``{nonce, tests, collect_errors}`` as one message on ``FD``.

The grader accepts that message only from this process (``SO_PASSCRED``), with the nonce,
once; a test counts as passed only if this plugin saw its function return.
"""

from __future__ import annotations

import ast
import ctypes
import json
import os
import random
import re
import socket
import sys
from typing import Any

import _pytest.assertion.rewrite
import _pytest.python
import pytest

_MAX_TEXT = 1500
_MAX_NODES = 2000
_MAX_MESSAGE = 150_000  # one SOCK_SEQPACKET message must fit the default socket buffers
_PR_SET_DUMPABLE = 4
_CTYPES_EVENTS = (
    "addressof call_function cdata cdata/buffer dlopen dlsym dlsym/handle PyObj_FromPtr"
    " string_at wstring_at set_errno get_errno create_string_buffer create_unicode_buffer"
)
_DENIED_EVENTS = frozenset(
    {"os.exec", "os.posix_spawn", "gc.get_objects", "gc.get_referrers", "gc.get_referents"}
    | {f"ctypes.{name}" for name in _CTYPES_EVENTS.split()}
)
_WATCHED_EVENTS = _DENIED_EVENTS | {"open", "object.__setattr__"}
_PROC_MEM = re.compile(r"(^|/)mem$")
_PLAIN = frozenset({int, float, complex, bool, str, bytes, type(None)})
_CONTAINERS = (list, tuple, set, frozenset, dict)


def main() -> None:
    """Set up the channel and the guards, then run pytest on the test files in ``argv``."""
    fd, workdir, files = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    sys.path.append(workdir)
    channel = socket.socket(fileno=fd)
    nonce = channel.recv(256).decode()
    os.set_inheritable(fd, False)
    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    tests = frozenset(os.path.abspath(f) for f in files)
    plugin = _Verdict(channel, nonce, _pytest.python.pytest_pyfunc_call, tests)
    _install_eq_guard(_pytest.assertion.rewrite)
    testdir = os.path.dirname(os.path.abspath(files[0])) if files else workdir
    args = ["-q", "-p", "no:cacheprovider", f"--rootdir={testdir}", f"--confcutdir={testdir}"]
    args += ["-c", os.path.join(testdir, "pytest.ini"), *files]
    sys.exit(int(pytest.main(args, plugins=[plugin])))


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in _WATCHED_EVENTS:  # the hook sees every audited event: keep the common path short
        _refuse(event, args)


def _refuse(event: str, args: tuple[Any, ...]) -> None:
    if event == "object.__setattr__" and args[1] == "__code__":
        raise PermissionError("replacing a function's code is not allowed in the grader sandbox")
    if event in _DENIED_EVENTS:
        raise PermissionError(f"{event} is not allowed in the grader sandbox")
    path = args[0] if event == "open" else None
    if isinstance(path, str | bytes) and _PROC_MEM.search(os.fsdecode(path)):
        raise PermissionError("opening process memory is not allowed in the grader sandbox")


class _Verdict:
    """The plugin: outcomes computed by our own call of each test function."""

    def __init__(
        self, channel: socket.socket, nonce: str, pyfunc_call: Any, files: frozenset[str]
    ) -> None:
        self._channel = channel
        self._files = files
        self._nonce = nonce
        self._call = pyfunc_call
        self._returned: set[str] = set()
        self._items: list[str] = []
        self._failed: dict[str, tuple[str, str]] = {}
        self._collect_errors: list[tuple[str, str]] = []
        self._sent = False

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self) -> None:
        """Collection imports the candidate: the audit hook goes in just before (installing it
        earlier would only make pytest's own start-up pay for it)."""
        sys.addaudithook(_audit)

    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        self._items = [item.nodeid for item in items]

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: Any) -> bool:
        func = getattr(pyfuncitem.obj, "__func__", pyfuncitem.obj)
        code = getattr(func, "__code__", None)
        if getattr(code, "co_filename", None) not in self._files:
            raise AssertionError(f"{pyfuncitem.nodeid} is not the test function of the test file")
        self._call(pyfuncitem=pyfuncitem)
        self._returned.add(pyfuncitem.nodeid)
        return True

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.failed and report.nodeid not in self._failed:
            self._failed[report.nodeid] = _describe(report)

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self._collect_errors.append((report.nodeid, _describe(report)[1]))

    def pytest_sessionfinish(self) -> None:
        if self._sent:
            return
        self._sent = True
        tests = []
        for nodeid in self._items:
            message, detail = self._failed.get(nodeid, ("", ""))
            ok = nodeid in self._returned and nodeid not in self._failed
            if not ok and not message:
                message = "the test function did not run to completion"
            tests.append({"id": nodeid, "passed": ok, "message": message, "detail": detail})
        errors = [{"id": i, "detail": d} for i, d in self._collect_errors]
        verdict = {"nonce": self._nonce, "tests": tests, "collect_errors": errors}
        data = json.dumps(verdict).encode()
        if len(data) > _MAX_MESSAGE:  # keep the outcomes, drop the texts
            for t in tests:
                t["message"], t["detail"] = str(t["message"])[:80], ""
            data = json.dumps(verdict).encode()
        self._channel.send(data)


def _describe(report: Any) -> tuple[str, str]:
    """(short message, last ``E`` line) of a failed pytest report."""
    text = str(report.longrepr)[-20_000:]
    crash = getattr(report.longrepr, "reprcrash", None)
    message = str(getattr(crash, "message", "") or "")
    lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
    lines = lines or text.strip().splitlines()[-1:]
    detail = lines[-1] if lines else ""
    return message[:_MAX_TEXT], detail[:_MAX_TEXT]


# --- bogus equality -------------------------------------------------------------------------

_GUARD = "@swapos_checked"


def _install_eq_guard(rewrite: Any) -> None:
    """Wrap pytest's assertion rewriter: every ``assert`` comparison operand goes through
    :func:`checked` first, so a value claiming equality with anything fails the test."""
    original = rewrite.rewrite_asserts
    module = type(sys)("_swapos_guard")
    module.checked = checked  # type: ignore[attr-defined]
    sys.modules["_swapos_guard"] = module

    def rewrite_asserts(mod: ast.Module, *args: Any, **kwargs: Any) -> None:
        _GuardOperands().visit(mod)
        mod.body.insert(_import_position(mod), _guard_import())
        ast.fix_missing_locations(mod)
        original(mod, *args, **kwargs)

    rewrite.rewrite_asserts = rewrite_asserts


def _import_position(mod: ast.Module) -> int:
    pos = 0
    for i, node in enumerate(mod.body):
        is_doc = i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        is_future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not (is_doc or is_future):
            break
        pos = i + 1
    return pos


def _guard_import() -> ast.stmt:
    return ast.ImportFrom(
        module="_swapos_guard", names=[ast.alias(name="checked", asname=_GUARD)], level=0
    )


class _GuardOperands(ast.NodeTransformer):
    def visit_Assert(self, node: ast.Assert) -> ast.Assert:
        self.generic_visit(node)
        if isinstance(node.test, ast.Compare):
            cmp = node.test
            cmp.left = _wrap(cmp.left)
            cmp.comparators = [_wrap(c) for c in cmp.comparators]
        return node


def _wrap(expr: ast.expr) -> ast.expr:
    if isinstance(expr, ast.Constant):
        return expr
    return ast.Call(func=ast.Name(id=_GUARD, ctx=ast.Load()), args=[expr], keywords=[])


class _Canary:
    """A fresh value nothing honest compares equal to."""

    __slots__ = ()
    __hash__ = object.__hash__


def checked(value: Any) -> Any:
    """Return ``value`` unchanged; raise AssertionError if it (or anything inside it) claims
    to equal values it cannot equal: a fresh object, a random int, float or string.

    Exact builtin scalars are trusted; containers are walked with the builtin types' own
    methods (so an overridden ``__iter__`` cannot hide an element), other objects are probed
    and their ``__dict__`` walked; at most ``_MAX_NODES`` values, 8 levels deep."""
    seen: set[int] = set()
    stack = [(value, 0)]
    for _ in range(_MAX_NODES * 4):
        if not stack:
            break
        v, depth = stack.pop()
        if type(v) in _PLAIN or id(v) in seen or depth > 8:
            continue
        seen.add(id(v))
        if type(v) not in _CONTAINERS:
            _probe(v)
        stack.extend((child, depth + 1) for child in _children(v))
    return value


def _children(v: Any) -> list[Any]:
    if isinstance(v, dict):
        return [*dict.keys(v), *dict.values(v)][:_MAX_NODES]
    if isinstance(v, list | tuple):
        return _base_items(v)
    if isinstance(v, set | frozenset):
        items = set.__iter__(v) if isinstance(v, set) else frozenset.__iter__(v)
        return [x for _, x in zip(range(_MAX_NODES), items, strict=False)]
    try:
        attrs = object.__getattribute__(v, "__dict__")
    except (AttributeError, TypeError):
        return []
    return list(dict.values(attrs))[:_MAX_NODES] if isinstance(attrs, dict) else []


def _base_items(v: Any) -> list[Any]:
    base = list if isinstance(v, list) else tuple
    return [base.__getitem__(v, i) for i in range(min(base.__len__(v), _MAX_NODES))]


def _probe(v: Any) -> None:
    rng = random.SystemRandom()
    canaries = (_Canary(), rng.getrandbits(62), rng.random() * 1e6, f"swapos-{rng.random()}")
    for canary in canaries:
        if _truthy(lambda c=canary: v == c) or _falsy(lambda c=canary: v != c):
            raise AssertionError(
                f"{type(v).__name__} value compares equal to an unrelated {type(canary).__name__}"
                " (bogus __eq__/__ne__): its comparisons cannot be trusted"
            )
    if _truthy(lambda: v < canaries[0]) or _truthy(lambda: v > canaries[0]):
        raise AssertionError(f"{type(v).__name__} value orders against any object (bogus __lt__)")
    if hasattr(type(v), "__contains__") and _truthy(lambda: canaries[0] in v):
        raise AssertionError(f"{type(v).__name__} value contains anything (bogus __contains__)")


def _truthy(compare: Any) -> bool:
    try:
        return bool(compare())
    except Exception:
        return False


def _falsy(compare: Any) -> bool:
    try:
        return not compare()
    except Exception:
        return False


if __name__ == "__main__":
    main()
