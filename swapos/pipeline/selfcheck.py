"""Self-check: run the examples a task's own brief gives, before the real tests grade it.

HumanEval prompts (and many briefs) show examples in the docstring: ``>>> f(2)`` followed by
the expected value, or ``f(2) ➞ 4``, ``f(2) == 4``. Those are part of what the model is shown,
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
    r"^(?P<call>.+?)\s*(?:➞|==>|=>|->|==|→|➜|returns|should return)\s*(?P<want>.+?)\s*$"
)


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

    Doctest examples (``>>> call`` then the value on the next line) and arrow examples
    (``call ➞ value``, ``call == value``, ``call -> value``) count when the call is the entry
    point applied to literal arguments and the value is a literal (a number, string, list...,
    ``True``/``False``/``None``). At most
    :data:`MAX_EXAMPLES`, in order, without repeats.
    """
    entry = task.entry_point
    if not entry:
        return []
    lines = task.starter.splitlines()
    found: list[Example] = []
    for i, raw in enumerate(lines):
        line = raw.strip()
        example: Example | None = None
        if line.startswith(">>>"):
            call = line[3:].strip()
            want = lines[i + 1].strip() if i + 1 < len(lines) else ""
            example = _example(call, want, entry)
        elif (m := _ARROW.match(line)) is not None:
            example = _example(m.group("call"), m.group("want"), entry)
        if example is not None and example not in found:
            found.append(example)
    return found[:MAX_EXAMPLES]


def _example(call: str, want: str, entry: str) -> Example | None:
    call, want = call.strip().rstrip(",;"), want.strip().rstrip(",;")
    if not want or want.startswith(">>>"):
        return None
    try:
        tree = ast.parse(call, mode="eval")
        ast.literal_eval(want)
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
