"""Values an example may state beyond literals: arithmetic on numbers, and constructions of
the value types a starter makes available; and that such an example, run in the sandbox,
passes a correct answer and sends a wrong one back."""

from __future__ import annotations

import ast

import pytest

from swapos.data.task import Task, TaskMeta
from swapos.grader import grade
from swapos.passes.example_values import MAX_EXPONENT, is_value, make_example, value_makers
from swapos.passes.selfcheck import brief_examples, selfcheck_task


def value(text: str, makers: frozenset[str] = frozenset()) -> bool:
    return is_value(ast.parse(text, mode="eval").body, makers)


@pytest.mark.parametrize(
    "text",
    [
        "1024 * 1024",
        "1023.96 * 1024 ** 3",
        "-0.5",
        "(1 + 2) / 3",
        "2 ** -3",
        f"9 ** {MAX_EXPONENT}",
    ],
)
def test_arithmetic_on_numbers_is_a_value(text: str) -> None:
    assert value(text)


@pytest.mark.parametrize(
    "text",
    [f"9 ** {MAX_EXPONENT + 1}", "10 ** 10 ** 10", "2 ** n", "'a' * 3", "x + 1", "1j ** 2.5"],
)
def test_other_expressions_are_not(text: str) -> None:
    assert not value(text)


def test_constructions_name_only_the_makers() -> None:
    makers = frozenset({"Interval", "datetime.date"})
    assert value("[Interval(1, 6), Interval(8, 10)]", makers)
    assert value("{'a': datetime.date(2024, 2, 29)}", makers)
    assert value("Interval(start=1, end=2 ** 3)", makers)
    assert not value("Interval(1, x)", makers)  # a variable is no value
    assert not value("Interval(*pair)", makers)
    assert not value("Other(1)", makers)
    assert not value("Interval(1, 2)")


@pytest.mark.parametrize(
    ("starter", "made"),
    [
        ("from dataclasses import dataclass\n@dataclass(order=True)\nclass P:\n    x: int\n", True),
        ("import dataclasses\n@dataclasses.dataclass\nclass P:\n    x: int\n", True),
        ("from dataclasses import dataclass\n@dataclass(eq=False)\nclass P:\n    x: int\n", False),
        ("from typing import NamedTuple\nclass P(NamedTuple):\n    x: int\n", True),
        ("from collections import namedtuple\nP = namedtuple('P', 'x y')\n", True),
        ("import enum\nclass P(enum.Enum):\n    A = 1\n", True),
        ("class P:\n    def __eq__(self, other):\n        return True\n", True),
        ("class P:\n    def __init__(self, x):\n        self.x = x\n", False),
        (
            "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n__all__ = []\n",
            False,
        ),
        ("from dataclasses import dataclass\n@dataclass\nclass _P:\n    x: int\n", False),
    ],
)
def test_a_starters_class_is_a_value_type_when_it_compares_by_value(
    starter: str, made: bool
) -> None:
    names = value_makers(starter)
    assert (("P" in names) or ("_P" in names)) is made


def test_standard_value_types_by_the_names_the_starter_binds() -> None:
    names = value_makers("from datetime import date as d\nimport decimal as dec\n")
    assert {"d", "dec.Decimal", "decimal.Decimal", "datetime.date"} <= names
    assert "date" not in names  # the starter binds it as ``d``
    # ``datetime`` bound to the class: ``datetime.date(...)`` would not mean the type
    assert "datetime.date" not in value_makers("from datetime import datetime\n")
    assert "datetime" in value_makers("from datetime import datetime\n")


def test_make_example_takes_constructed_arguments_and_values() -> None:
    makers = frozenset({"Interval"})
    example = make_example("merge([Interval(1, 3)])", "[Interval(1, 3)]", "merge", makers)
    assert example is not None and example.want == "[Interval(1, 3)]"
    assert make_example("merge([Interval(1, 3)])", "[Interval(1, 3)]", "merge") is None


INTERVALS = """from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Interval:
    start: int
    end: int
"""

BRIEF = """# Add `merge`

Examples:

- `merge([Interval(1, 3), Interval(2, 6)])` -> `[Interval(1, 6)]`
- `merge([Interval(4, 4)])` -> `[]`
- `span(date(2024, 2, 28), date(2024, 3, 1))` ->
  `[date(2024, 2, 28), datetime.date(2024, 2, 29), date(2024, 3, 1)]`
- `size(1.5 * 1024 ** 2)` -> `"1.5 MiB"`

```python
>>> print(grid(2))
..
..
```
"""

RIGHT = """
def merge(intervals):
    out = []
    for i in sorted(x for x in intervals if x.end > x.start):
        if out and i.start <= out[-1].end:
            out[-1] = Interval(out[-1].start, max(out[-1].end, i.end))
        else:
            out.append(i)
    return out


def span(a, b):
    return [a + timedelta(days=n) for n in range((b - a).days + 1)]


def size(n):
    return f"{n / 1024 ** 2:.1f} MiB"


def grid(n):
    return "\\n".join("." * n + " " for _ in range(n))  # trailing spaces: print shows them
"""

WRONG = RIGHT.replace("range((b - a).days + 1)", "range((b - a).days)").replace(
    '"." * n', '"." * (n + 1)'
)


def test_constructed_examples_pass_a_right_answer_and_send_a_wrong_one_back() -> None:
    starter = "from datetime import date, timedelta\n\n" + INTERVALS
    task = Task(
        meta=TaskMeta(task_id="t", category="feature"),
        root="",
        problem=BRIEF,
        starter=starter,
        tests={},
    )
    examples = brief_examples(task)
    assert [e.call for e in examples] == [
        "merge([Interval(1, 3), Interval(2, 6)])",
        "merge([Interval(4, 4)])",
        "span(date(2024, 2, 28), date(2024, 3, 1))",
        "size(1.5 * 1024 ** 2)",
        "grid(2)",
    ]
    checked = selfcheck_task(task, examples)
    assert grade(checked, starter + RIGHT, timeout_s=20).passed
    wrong = grade(checked, starter + WRONG, timeout_s=20)
    assert (wrong.tests_passed, wrong.tests_total) == (3, 5)
    assert "span(date(2024, 2, 28), date(2024, 3, 1)) returned" in wrong.output_tail
    assert "test_example_5 - AssertionError: grid(2) r" in wrong.output_tail
