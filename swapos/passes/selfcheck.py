"""Self-check: run the examples a task's own text gives, before the real tests grade it.

HumanEval prompts (and many briefs) show examples in the docstring: ``>>> f(2)`` followed by
the expected value, or ``f(2) ➞ 4``, ``f(2) == 4``, ``f(2) = 4``, ``For x = 2 the output
should be 4``, ``Input: x = 2`` then ``Output: 4``. Those are part of what the model is shown,
so checking a candidate against them is fair, where peeking at the hidden tests is not. A
candidate that fails its own examples goes back to the coder with the failure, without
spending a grade. A repository task's markdown brief states them in other forms
(```` `slugify("A b")` -> `"a-b"` ````, tables, ``>>>`` blocks...): those are read by
:mod:`swapos.passes.brief_examples`, which also decides where a bugfix brief states the
wanted result rather than the bug.

:func:`task_examples` finds the examples (:func:`docstring_examples`,
:func:`brief_examples`); :func:`selfcheck_task` turns them into a task whose one test file
asserts each, so the same sandboxed grader runs them; :func:`example_outcomes` reads one
check's result back per example, and :func:`distrusted` says which examples the candidates'
evidence shows to be wrong (they are then no longer obeyed).
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from swapos.data.task import Task, TaskMeta
from swapos.grader import GradeResult
from swapos.passes import brief_examples as briefs
from swapos.passes.example_values import STDLIB_VALUE_TYPES, make_example, value_makers
from swapos.passes.example_values import Example as Example  # noqa: PLC0414 (re-exported)

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


def task_examples(task: Task) -> list[Example]:
    """The examples a task's own text gives: its docstring's for a ``completion`` task, its
    brief's for the others (:func:`brief_examples`)."""
    return docstring_examples(task) if task.category == "completion" else brief_examples(task)


def brief_examples(task: Task) -> list[Example]:
    """The examples a repository task's markdown brief states
    (:func:`swapos.passes.brief_examples.brief_examples` has the forms and the rules: a
    bugfix brief gives only those that state the wanted result, never the bug)."""
    return briefs.brief_examples(task.problem, task.starter, task.category)


def docstring_examples(task: Task) -> list[Example]:
    """The examples in ``task``'s starter that call its entry point and parse as Python.

    Doctest examples (``>>> call`` then the value on the next line, or ``>>> call == value``),
    arrow examples (``call ➞ value``, ``call == value``, ``call = value``, ``call -> value``,
    after a ``*`` bullet or a ``for``/``assert``), ``For x = 1, y = 2 the output should be
    value`` and ``Input: x = 1, y = 2`` (or a value, or ``name : value`` lines) then
    ``Output: value`` count when the call is the entry point applied to values (named
    arguments are passed in their order) and the value is one (a literal: a number, string,
    list..., ``True``/``False``/``None``, ``true``/``false`` read as such; arithmetic on
    numbers; a construction of a value type the prompt defines or imports:
    :mod:`~swapos.passes.example_values`). At most
    :data:`MAX_EXAMPLES`, in order, without repeats.
    """
    entry = task.entry_point
    if not entry:
        return []
    lines = task.starter.splitlines()
    makers = value_makers(task.starter)
    found: list[Example] = []
    given: list[str] | None = None  # the lines of an ``Input:`` awaiting its ``Output:``
    for i, raw in enumerate(lines):
        line = _BULLET.sub("", raw.strip())
        example: Example | None = None
        if line.startswith(">>>"):
            call = line[3:].strip()
            want = lines[i + 1].strip() if i + 1 < len(lines) else ""
            example = make_example(call, want, entry, makers)
            if example is None and (m := _ARROW.match(call)) is not None:
                example = make_example(m.group("call"), m.group("want"), entry, makers)
        elif (m := _INPUT.match(line)) is not None:
            given = [m.group("args")] if m.group("args") else []
        elif (m := _OUTPUT.match(line)) is not None and given:
            example = make_example(_call(entry, given), m.group("want"), entry, makers)
            given = None
        elif given is not None:
            given = [*given, line] if line else None  # a blank line ends an unanswered Input
        elif (m := _FOR.match(line)) is not None:
            example = make_example(_call(entry, [m.group("args")]), m.group("want"), entry, makers)
        elif (m := _ARROW.match(line)) is not None:
            example = make_example(m.group("call"), m.group("want"), entry, makers)
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


class CandidateCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One distinct candidate's self-check, example by example (indexes into the examples).

    Attributes:
        model: the model that wrote the candidate.
        passed: the examples it passes.
        failed: the examples it fails -> the ``repr`` of what it returned, or None when that
            is not known (the call raised, or the output does not show it).
    """

    model: str
    passed: frozenset[int]
    failed: Mapping[int, str | None]


MIN_CANDIDATES: Final = 3
MIN_MODELS: Final = 2


def distrusted(
    checks: Sequence[CandidateCheck],
    *,
    min_candidates: int = MIN_CANDIDATES,
    min_models: int = MIN_MODELS,
) -> frozenset[int]:
    """The examples that the candidates' own evidence shows to be wrong. Pure.

    A task's examples can themselves be wrong (HumanEval_116's docstring sorts by value
    where its text sorts by the count of ones; HumanEval_130's recurrence line ``tri(1) = 3``
    reads as an example of ``tri``, which returns a list). Obeying such an example sends
    every correct candidate back. Without the reference, the evidence that an example is
    wrong is the candidates themselves, and example ``i`` is distrusted only when all hold:

    1. **breadth**: at least ``min_candidates`` distinct candidates (the caller passes each
       distinct source once), written by at least ``min_models`` different models, were
       checked;
    2. **unanimity**: every one of them fails example ``i``;
    3. **consensus**: every one of them *returned* a value for it (none raised, none
       unknown), and it is the same value: independent programs agree on one answer, and
       the example says another;
    4. **support**: some other example passes for every one of them (they are otherwise
       consistent with the task's own examples), or, when every example fails for all of
       them, they agree on the value of every example and those values are not all the
       same (they compute an answer: a stub returning ``None`` everywhere is no evidence).

    A distrusted example is dropped from the self-check (the candidate is no longer sent
    back for it); the task's real tests still grade the candidate, so a wrong call here
    costs a grade, never a wrong pass.
    """
    if len(checks) < min_candidates or len({c.model for c in checks}) < min_models:
        return frozenset()
    passed_by_all = frozenset.intersection(*(c.passed for c in checks))
    failed_by_all = set.intersection(*(set(c.failed) for c in checks))
    agreed = {i: _agreed(checks, i) for i in failed_by_all}
    agreed = {i: v for i, v in agreed.items() if v is not None}
    examples = set.union(*(set(c.passed) | set(c.failed) for c in checks))
    computes = len(set(agreed.values())) > 1 and set(agreed) == examples
    return frozenset(i for i in agreed if passed_by_all - {i} or computes)


def _agreed(checks: Sequence[CandidateCheck], i: int) -> str | None:
    """The value every check returned for example ``i``, if they all returned the same."""
    values = {c.failed[i] for c in checks}
    return next(iter(values)) if len(values) == 1 else None


_FAILED_TEST: Final = re.compile(r"^FAILED \S*::test_example_(\d+)\b", re.MULTILINE)


def example_outcomes(
    result: GradeResult, examples: Sequence[Example]
) -> tuple[frozenset[int], dict[int, str | None]]:
    """``(passed, failed)`` of one :func:`selfcheck_task` grading of ``examples``, read from
    its result (as :class:`CandidateCheck` holds them). A grading that did not run the
    examples (``error``, ``timeout``, ``crash``), or whose failures the output does not
    name, gives nothing: no evidence either way."""
    everything = frozenset(range(len(examples)))
    if result.passed:
        return everything, {}
    names = {int(n) - 1 for n in _FAILED_TEST.findall(result.output_tail)}
    if (
        result.outcome != "fail"
        or not names
        or len(names) != result.tests_total - result.tests_passed
    ):
        return frozenset(), {}
    failed: dict[int, str | None] = {}
    for i in sorted(names & everything):
        failed[i] = _returned(result.output_tail, examples[i])
    return everything - names, failed


def _returned(output: str, example: Example) -> str | None:
    head, tail = f"AssertionError: {example.call} returned ", f" says {example.stated()}"
    for line in output.splitlines():
        body = line.partition(head)[2]
        if body and body.endswith(tail) and "; the " in body:
            return body[: body.rindex("; the ")]
    return None


_TEST_HEADER: Final = f'''"""Docstring examples as tests (the self-check, not the task's tests)."""

import math
import {", ".join(sorted(STDLIB_VALUE_TYPES))}  # what an example's ``datetime.date(...)`` names

from solution import *  # noqa: F403


def _printed(value):
    return "\\n".join(line.rstrip() for line in str(value).splitlines())


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
        setup = "".join(textwrap.indent(statement, "    ") + "\n" for statement in ex.setup)
        tests.append(
            f"\n\ndef test_example_{i}():\n{setup}"
            f"    got = {f'_printed({ex.call})' if ex.printed else ex.call}\n"
            f"    want = {ex.want}\n"
            f"    assert _same(got, want), f'{_escape(ex.call)} returned {{got!r}}; "
            f"the {source} says {_escape(ex.stated())}'\n"
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
