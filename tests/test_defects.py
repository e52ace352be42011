"""What is wrong with a candidate without running it (swapos.passes.defects)."""

from __future__ import annotations

from swapos.data.task import Task, TaskMeta
from swapos.passes.defects import candidate_defect


def task(problem: str, *, category: str = "feature", starter: str = "") -> Task:
    meta = TaskMeta(task_id="t", category=category, difficulty=2, description="d")
    return Task(meta=meta, root="", problem=problem, starter=starter, tests={})


WINDOW = "class MetricsWindow:\n    pass\n"
ASKS = task("Add a `RingBuffer` class and switch `MetricsWindow` to it.", starter=WINDOW)


def test_a_candidate_that_does_not_parse_says_where() -> None:
    defect = candidate_defect('"""\nAdd a `RingBuffer`...\n', ASKS)
    assert defect.startswith("the candidate is not valid Python: SyntaxError: ")
    assert "(line 1)" in defect


def test_a_candidate_without_the_asked_name_names_it() -> None:
    defect = candidate_defect(WINDOW, ASKS)
    assert defect == (
        "the candidate does not define `RingBuffer` at module level, which the task asks to "
        "add; the tests import it from solution.py"
    )


def test_the_asked_name_bound_in_any_top_level_way_is_no_defect() -> None:
    for code in (
        "class RingBuffer:\n    pass\n",
        "from collections import deque as RingBuffer\n",
        "try:\n    from fast import RingBuffer\nexcept ImportError:\n    RingBuffer = list\n",
        "if True:\n    class RingBuffer:\n        pass\n",
    ):
        assert candidate_defect(code, ASKS) == "", code


def test_a_method_or_a_local_of_that_name_is_not_a_module_level_one() -> None:
    assert candidate_defect("class W:\n    def RingBuffer(self):\n        pass\n", ASKS)
    assert candidate_defect("def f():\n    RingBuffer = 1\n    return RingBuffer\n", ASKS)


def test_nothing_is_asked_of_a_completion_task_or_an_empty_candidate() -> None:
    completion = task("Add a function `f(x)`.", category="completion")
    assert candidate_defect("def g(x):\n    return x\n", completion) == ""
    assert candidate_defect("def g(x:\n", completion).startswith("the candidate is not valid")
    assert candidate_defect("  \n", ASKS) == ""
