"""Self-check: run the examples a task's own brief gives, before the real tests grade it.

HumanEval prompts (and many briefs) show examples in the docstring: ``>>> f(2)`` followed by
the expected value, or ``f(2) ➞ 4``, ``f(2) == 4``, ``f(2) = 4``, ``For x = 2 the output
should be 4``, ``Input: x = 2`` then ``Output: 4``. Those are part of what the model is shown,
so checking a candidate against them is fair, where peeking at the hidden tests is not. A
candidate that fails its own examples goes back to the coder with the failure, without
spending a grade. A repository task's brief can give them too, inline:
```` `slugify("A b") == "a-b"` ````.

:func:`task_examples` finds the examples (:func:`docstring_examples`,
:func:`brief_examples`); :func:`selfcheck_task` turns them into a task whose one test file
asserts each, so the same sandboxed grader runs them.
"""

from __future__ import annotations

import ast
import re
from typing import Final

import msgspec

from swapos.data.task import Task, TaskMeta

MAX_EXAMPLES: Final = 12
_ARROW: Final = re.compile(
    r"^(?P<call>.+?)\s*(?:➞|==>|=>|->|==|(?<![=!<>])=(?!=)|→|➜|returns|should return)"
    r"\s*(?P<want>.+?)\s*$"
)
_BULLET: Final = re.compile(r"^(?:[*-]\s+|(?:for|assert)\s+(?=\w+\())", re.IGNORECASE)
_FOR: Final = re.compile(
    r"^for\s+(?P<args>\w+\s*=.+?),?\s+the\s+(?:output|result)\s+should\s+be\s+(?P<want>.+)$",
    re.IGNORECASE,
)
_INPUT: Final = re.compile(r"^input\s*:\s*(?P<args>.*)$", re.IGNORECASE)
_OUTPUT: Final = re.compile(r"^output\s*:\s*(?P<want>.+)$", re.IGNORECASE)
_NAMED: Final = re.compile(r"^(\w+)\s*:\s*")  # ``grid : [[0, 1]]`` on its own line


class Example(msgspec.Struct, frozen=True, kw_only=True):
    """One example: an expression and the value it should have (both Python source)."""

    call: str
    want: str


_SPAN: Final = re.compile(r"`([^`\n]+)`")
_EQUALS: Final = re.compile(r"^(?P<call>[A-Za-z_]\w*\(.*\))\s*==\s*(?P<want>.+)$")


def task_examples(task: Task) -> list[Example]:
    """The examples a task's own text gives: its docstring's for a ``completion`` task, its
    brief's for the others (:func:`brief_examples`)."""
    return docstring_examples(task) if task.category == "completion" else brief_examples(task)


def brief_examples(task: Task) -> list[Example]:
    """The inline examples of a repository task's brief: code spans ``call == value`` where
    the call is a plain function name applied to literals and the value is a literal. None
    for a ``bugfix`` brief, which may well quote the behaviour that is wrong. At most
    :data:`MAX_EXAMPLES`, in order, without repeats."""
    if task.category == "bugfix":
        return []
    found: list[Example] = []
    for span in _SPAN.findall(task.problem):
        m = _EQUALS.match(span.strip())
        if m is None:
            continue
        name = m.group("call").split("(", 1)[0]
        example = _example(m.group("call"), m.group("want"), name)
        if example is not None and example not in found:
            found.append(example)
    return found[:MAX_EXAMPLES]


def docstring_examples(task: Task) -> list[Example]:
    """The examples in ``task``'s starter that call its entry point and parse as Python.

    Doctest examples (``>>> call`` then the value on the next line, or ``>>> call == value``),
    arrow examples (``call ➞ value``, ``call == value``, ``call = value``, ``call -> value``,
    after a ``*`` bullet or a ``for``/``assert``), ``For x = 1, y = 2 the output should be
    value`` and ``Input: x = 1, y = 2`` (or a value, or ``name : value`` lines) then
    ``Output: value`` count when the call is the entry point applied to literal arguments
    (named arguments are passed in their order) and the value is a literal (a number,
    string, list..., ``True``/``False``/``None``; ``true``/``false`` read as such). At most
    :data:`MAX_EXAMPLES`, in order, without repeats.
    """
    entry = task.entry_point
    if not entry:
        return []
    lines = task.starter.splitlines()
    found: list[Example] = []
    given: list[str] | None = None  # the lines of an ``Input:`` awaiting its ``Output:``
    for i, raw in enumerate(lines):
        line = _BULLET.sub("", raw.strip())
        example: Example | None = None
        if line.startswith(">>>"):
            call = line[3:].strip()
            want = lines[i + 1].strip() if i + 1 < len(lines) else ""
            example = _example(call, want, entry)
            if example is None and (m := _ARROW.match(call)) is not None:
                example = _example(m.group("call"), m.group("want"), entry)
        elif (m := _INPUT.match(line)) is not None:
            given = [m.group("args")] if m.group("args") else []
        elif (m := _OUTPUT.match(line)) is not None and given:
            example = _example(_call(entry, given), m.group("want"), entry)
            given = None
        elif given is not None:
            given = [*given, line] if line else None  # a blank line ends an unanswered Input
        elif (m := _FOR.match(line)) is not None:
            example = _example(_call(entry, [m.group("args")]), m.group("want"), entry)
        elif (m := _ARROW.match(line)) is not None:
            example = _example(m.group("call"), m.group("want"), entry)
        if example is not None and example not in found:
            found.append(example)
    return found[:MAX_EXAMPLES]


def _call(entry: str, given: list[str]) -> str:
    """``entry`` applied to the arguments written in ``given`` (``x = 1, y = 2``, a bare
    value, or one ``name : value`` per line), positionally in their order; "" if they do not
    parse."""
    text = ", ".join(_NAMED.sub(r"\1=", part.strip().rstrip(",")) for part in given)
    try:
        node = ast.parse(f"_({text})", mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return ""
    if not isinstance(node, ast.Call):
        return ""
    values = [*node.args, *(k.value for k in node.keywords)]
    return f"{entry}({', '.join(ast.unparse(v) for v in values)})"


def _example(call: str, want: str, entry: str) -> Example | None:
    call, want = call.strip().rstrip(",;"), _value(want.strip().rstrip(",;"))
    if not want or want.startswith(">>>"):
        return None
    try:
        tree = ast.parse(call, mode="eval")
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    node = tree.body
    if not (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry
    ):
        return None
    if not all(_literal(arg) for arg in [*node.args, *(k.value for k in node.keywords)]):
        return None  # e.g. ``is_happy(abc)``: the docstring meant a string it did not quote
    return Example(call=call, want=want)


def _value(want: str) -> str:
    """``want`` as a Python literal, or "": a trailing comment or full stop dropped,
    ``true``/``false`` read as ``True``/``False``."""
    want = {"true": "True", "false": "False"}.get(want, want)
    for text in (want.split(" #", 1)[0].strip(), want, want.rstrip(".")):
        try:
            ast.literal_eval(text)
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            continue
        return text
    return ""


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


_TEST_HEADER: Final = '''"""Docstring examples as tests (the self-check, not the task's tests)."""

import math

from solution import *  # noqa: F403


def _same(got, want):
    if isinstance(want, float) or isinstance(got, float):
        try:
            return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-6)
        except TypeError:
            return False
    if isinstance(want, (list, tuple)) and isinstance(got, (list, tuple)):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want))
    numbers = isinstance(got, (int, float)) and isinstance(want, (int, float))
    return (type(got) is type(want) or numbers) and got == want
'''


def selfcheck_task(task: Task, examples: list[Example]) -> Task:
    """A task whose one test file checks ``examples`` against ``solution.py``."""
    source = "docstring" if task.category == "completion" else "task"
    tests = [_TEST_HEADER]
    for i, ex in enumerate(examples, 1):
        tests.append(
            f"\n\ndef test_example_{i}():\n"
            f"    got = {ex.call}\n"
            f"    want = {ex.want}\n"
            f"    assert _same(got, want), f'{_escape(ex.call)} returned {{got!r}}; "
            f"the {source} says {_escape(ex.want)}'\n"
        )
    return Task(
        meta=TaskMeta(
            task_id=f"{task.task_id}.selfcheck",
            category=task.category,
            difficulty=task.meta.difficulty,
            description="docstring examples",
        ),
        root="",
        problem=task.problem,
        starter=task.starter,
        tests={"test_selfcheck.py": "".join(tests)},
        entry_point=task.entry_point,
    )


def _escape(text: str) -> str:
    """``text`` inside a single-quoted f-string: quotes, backslashes and braces escaped."""
    return text.replace("\\", "\\\\").replace("'", "\\'").replace("{", "{{").replace("}", "}}")
