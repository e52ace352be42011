"""The grader's verdict: the runner's one message, how the host checks it, and the outcome.

The in-sandbox runner (``_runner.py``) sends one ``SOCK_SEQPACKET`` message at the end of the
session. :func:`read_verdict` accepts it only if it is the only message, was sent by the
runner's own process (kernel-checked ``SCM_CREDENTIALS``), carries this run's nonce and decodes;
:func:`classify` then requires every test found statically (:func:`static_ids`) to have run
and passed. Nothing is read from the work directory.
"""

from __future__ import annotations

import ast
import signal
import socket
import struct
from pathlib import Path
from typing import Literal

import msgspec

Outcome = Literal["pass", "fail", "error", "timeout", "crash", "cancelled"]

_MAX_MESSAGE = 1 << 20
_CREDS = struct.Struct("iII")


class TestOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """One collected test as the runner saw it.

    Attributes:
        id: pytest's node id (``file.py::Class::test[param]``).
        passed: the runner's own call of the test function returned, and no phase failed.
        message: pytest's short failure message (empty when passed).
        detail: the last ``E`` line of the failure (the exception itself).
    """

    id: str
    passed: bool
    message: str = ""
    detail: str = ""


class CollectError(msgspec.Struct, frozen=True, kw_only=True):
    """A test file that could not be collected (imported)."""

    id: str
    detail: str


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """The runner's report: one entry per collected test, plus collection errors."""

    nonce: str
    tests: list[TestOutcome]
    collect_errors: list[CollectError]


class Tampered(msgspec.Struct, frozen=True, kw_only=True):
    """The verdict channel carried something the runner did not send; ``reason`` says what."""

    reason: str


def read_verdict(sock: socket.socket, *, nonce: str, pid: int) -> Verdict | Tampered | None:
    """Drain ``sock`` without blocking; the runner's verdict, evidence of tampering, or None.

    Args:
        sock: the grader's end of the channel, with ``SO_PASSCRED`` set before the run.
        nonce: the value sent to the runner before the candidate was imported.
        pid: the runner's pid as the grader sees it.
    """
    messages = _drain(sock)
    if not messages:
        return None
    if len(messages) > 1:
        return Tampered(reason=f"{len(messages)} messages on the verdict channel (expected one)")
    data, sender, truncated = messages[0]
    if sender != pid:
        return Tampered(reason=f"verdict sent by pid {sender}, not by the test runner ({pid})")
    if truncated:
        return Tampered(reason="verdict message too large")
    try:
        verdict = msgspec.json.decode(data, type=Verdict)
    except msgspec.DecodeError as e:
        return Tampered(reason=f"verdict does not decode: {e}")
    if verdict.nonce != nonce:
        return Tampered(reason="verdict carries the wrong nonce")
    return verdict


def _drain(sock: socket.socket) -> list[tuple[bytes, int | None, bool]]:
    out: list[tuple[bytes, int | None, bool]] = []
    while len(out) < 100:
        try:
            data, anc, flags, _ = sock.recvmsg(
                _MAX_MESSAGE, socket.CMSG_SPACE(_CREDS.size), socket.MSG_DONTWAIT
            )
        except OSError:
            break
        if not data:
            break
        sender = None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                sender = _CREDS.unpack(payload[: _CREDS.size])[0]
        out.append((data, sender, bool(flags & socket.MSG_TRUNC)))
    return out


def static_ids(tests: dict[str, str]) -> set[str]:
    """Node ids (``file.py::test_x``, ``file.py::TestY::test_z``) of the tests in ``tests``."""
    ids: set[str] = set()
    for name, source in tests.items():
        file = Path(name).name
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            ids.update(f"{file}::{n}" for n in _test_names(node))
            if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                for member in node.body:
                    ids.update(f"{file}::{node.name}::{n}" for n in _test_names(member))
    return ids


def _test_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
        return [node.name]
    return []


_SIGNALS = {
    signal.SIGXCPU: "CPU time limit exceeded",
    signal.SIGXFSZ: "file size limit exceeded",
    signal.SIGKILL: "killed",
    signal.SIGSEGV: "segmentation fault",
}


def classify(
    rc: int,
    timed_out: bool,
    verdict: Verdict | Tampered | None,
    expected: set[str],
    *,
    timeout_s: float,
) -> tuple[Outcome, str]:
    """The outcome and a one-line reason, from the run's exit and the runner's verdict.

    Pass needs all of: exit code 0, an authentic verdict, no collection error, every test of
    ``expected`` reported, every reported test passed.
    """
    if timed_out:
        return "timeout", f"tests did not finish within {timeout_s:g}s (killed)"
    if rc > 128:
        return "crash", f"test run died: {_signal_name(rc - 128)}"
    if verdict is None:
        return "crash", f"test run exited (code {rc}) without a verdict; see output"
    if isinstance(verdict, Tampered):
        return "error", f"verdict rejected: {verdict.reason}"
    return _judge(rc, verdict, expected)


def _signal_name(sig: int) -> str:
    """What signal ``sig`` means; any number works (an ``exit(168)`` also looks like one)."""
    try:
        known = signal.Signals(sig)
    except ValueError:
        return f"signal or exit status {sig + 128}"
    return _SIGNALS.get(known, known.name)


def _judge(rc: int, verdict: Verdict, expected: set[str]) -> tuple[Outcome, str]:
    if verdict.collect_errors:
        err = verdict.collect_errors[0]
        return "error", f"tests could not be collected ({err.id}): {err.detail}"
    if not verdict.tests:
        return "error", "no tests were collected"
    failed = [t for t in verdict.tests if not t.passed]
    if failed:
        names = ", ".join(t.id.rsplit("::", 1)[-1] for t in failed[:5])
        first = _first_line(failed[0].message or failed[0].detail)
        return "fail", f"{len(failed)}/{len(verdict.tests)} tests failed: {names}. First: {first}"
    missing = sorted(expected - {t.id.split("[", 1)[0] for t in verdict.tests})
    if missing:
        return "fail", f"{len(missing)} tests did not run: {', '.join(missing[:5])}"
    if rc != 0:
        return "error", f"pytest exited with code {rc} although every test passed"
    return "pass", f"all {len(verdict.tests)} tests passed"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else ""
