"""What a failed grade's output says, read for the focus prompt (retry rule 11): the first
failing test, its failing line and error, and the lines of the candidate it ran.

The grader's feedback is its one-line reason (``3/5 tests failed: test_a, test_b. First:
ValueError: ...``) then pytest's output: one ``____ test_name ____`` section per failing
test, its source with the failing line marked ``>``, the ``E`` lines of its error, and the
frames it ran through (``solution.py:5: ValueError``). Pure functions over that text.
"""

from __future__ import annotations

import ast
import re
from typing import Final

import msgspec

_SECTION: Final = re.compile(r"^_{3,} (.+?) _{3,}$")
_MARKED: Final = re.compile(r"^>\s+(.*\S)")
_ERROR: Final = re.compile(r"^E\s+(.*\S)")
_FRAME: Final = re.compile(r"(?:^|[/\s])solution\.py:(\d+):")
_CALLED: Final = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_ARGS: Final = re.compile(r"^[A-Za-z_]\w* = \S")


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    """One failing test, as its output shows it.

    Attributes:
        test: the test's name (``test_empty_query``), or "" when the output names none.
        line: the failing statement of the test (``assert parse_query("") == {}``; a
            statement over several lines joined into one), or "".
        args: the test's arguments as pytest shows them (a parametrized test's
            ``line = 'a,b', expected = ['a', 'b']``), or "".
        error: the first line of its error (``assert 1.0 == 0.5``, ``ValueError: ...``).
        frames: line numbers of ``solution.py`` in its traceback, outermost first.
    """

    test: str = ""
    line: str = ""
    args: str = ""
    error: str = ""
    frames: tuple[int, ...] = ()

    @property
    def headline(self) -> str:
        """The failure in one line: its failing line and what it raised or compared."""
        line = self.line.strip()
        if not line:
            return self.error
        if self.args:
            line += f", with {self.args}"
        if not self.error or self.error in line:
            return f"This fails: {line}"
        return f"This fails: {line}  ->  {self.error}"


def failures(output: str) -> list[Failure]:
    """The failing tests of a grade's ``output``, in order (none: it has no sections)."""
    sections: list[tuple[str, list[str]]] = []  # each failing test's name and lines
    for raw in output.splitlines():
        line = raw.rstrip()
        if head := _SECTION.match(line):
            sections.append((head.group(1), []))
        elif line.startswith(("=====", "FAILED ")):
            sections.append(("", []))  # the end of the sections: what follows is not one
        elif sections:
            sections[-1][1].append(line)
    return [_failure(test, lines) for test, lines in sections if test]


def _failure(test: str, lines: list[str]) -> Failure:
    error = next((m.group(1) for line in lines if (m := _ERROR.match(line))), "")
    frames = [int(m.group(1)) for line in lines if (m := _FRAME.search(line))]
    return Failure(
        test=test, line=_statement(lines), args=_args(lines), error=error,
        frames=tuple(dict.fromkeys(frames)),
    )  # fmt: skip


def _statement(lines: list[str], most: int = 6) -> str:
    """The test's marked statement, its continuation lines (up to the error) joined."""
    at = next((i for i, line in enumerate(lines) if _MARKED.match(line)), None)
    if at is None:
        return ""
    parts = [lines[at][1:].strip()]
    for line in lines[at + 1 : at + most]:
        if not line.strip() or _ERROR.match(line) or line.lstrip().startswith("^"):
            break
        parts.append(line.strip())
    return " ".join(parts)


def _args(lines: list[str]) -> str:
    """The arguments pytest prints above the test's source (``x = 1, y = 'a'``)."""
    for line in lines:
        if line.startswith(" ") or _MARKED.match(line):
            return ""  # the source began: no arguments
        if _ARGS.match(line):
            return line.strip()
    return ""


def first_failure(output: str) -> Failure | None:
    """The first failing test of ``output``; without pytest sections, the grade's own reason
    (its first line) as the error, or None for empty output."""
    found = failures(output)
    if found:
        return found[0]
    first = output.strip().splitlines()[0] if output.strip() else ""
    return Failure(error=first) if first else None


def exercised_lines(code: str, failure: Failure, *, limit: int = 40) -> str:
    """The lines of ``code`` the failing test ran, numbered, the traceback's own lines marked
    ``>``: each function its traceback passes through, or (an assertion on a returned value,
    no frame in ``code``) the functions of ``code`` its failing line calls. "" when none."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    lines = code.splitlines()
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    spans: list[tuple[int, int]] = []
    for at in failure.frames:
        around = [f for f in funcs if f.lineno <= at <= (f.end_lineno or f.lineno)]
        if around:  # the innermost function holding the line
            f = max(around, key=lambda f: f.lineno)
            spans.append((f.lineno, f.end_lineno or f.lineno))
        elif 0 < at <= len(lines):
            spans.append((at, at))
    if not spans:
        called = set(_CALLED.findall(failure.line))
        spans = [(f.lineno, f.end_lineno or f.lineno) for f in funcs if f.name in called]
    shown: list[int] = sorted({n for lo, hi in spans for n in range(lo, hi + 1)})[:limit]
    marked = set(failure.frames)
    width = len(str(shown[-1])) if shown else 1
    return "\n".join(
        f"{'>' if n in marked else ' '} {n:>{width}} | {lines[n - 1]}"
        for n in shown
        if n <= len(lines)
    )
