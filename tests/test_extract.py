"""Extraction of code, plans and feedback from messy small-model outputs."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swapos.data.task import Task, TaskMeta
from swapos.pipeline.extract import (
    MAX_PLAN_STEPS,
    expected_names,
    extract_code,
    extract_plan,
)

STARTER = "def mean(xs):\n    return sum(xs) / len(xs)\n"
GOOD = "def mean(xs):\n    if not xs:\n        return 0.0\n    return sum(xs) / len(xs)\n"

HUMANEVAL_PROMPT = (
    "from typing import List\n\n\n"
    "def below_zero(operations: List[int]) -> bool:\n"
    '    """Return True if the running balance ever falls below zero.\n'
    "    >>> below_zero([1, 2, -4, 5])\n"
    "    True\n"
    '    """\n'
)
BODY = (
    "    balance = 0\n"
    "    for op in operations:\n"
    "        balance += op\n"
    "        if balance < 0:\n"
    "            return True\n"
    "    return False\n"
)


def file_task(starter: str = STARTER) -> Task:
    return Task(
        meta=TaskMeta(task_id="bugfix/mean", category="bugfix"),
        root="",
        problem="Return 0.0 for an empty list.",
        starter=starter,
        tests={},
    )


def completion_task(prompt: str = HUMANEVAL_PROMPT) -> Task:
    return Task(
        meta=TaskMeta(task_id="HumanEval/3", category="completion"),
        root="",
        problem="",
        starter=prompt,
        tests={},
        entry_point="below_zero",
    )


FILE_CASES: dict[str, tuple[str, str, str]] = {
    # name: (output, expected code, expected how)
    "bare continuation after an opened fence": (GOOD, GOOD, "bare"),
    "closing fence then chatter": (
        GOOD + "```\n\nThis handles the empty list.\n```python\nprint(mean([]))\n```\n",
        GOOD,
        "before_fence",
    ),
    "prose then fenced block": (
        "Here is the fixed code:\n\n```python\n" + GOOD + "```\n\nIt returns 0.0 now.",
        GOOD,
        "fenced",
    ),
    "solution block then usage block": (
        "```python\n" + GOOD + "```\n\nUsage:\n\n```python\nprint(mean([1, 2]))\n```\n",
        GOOD,
        "fenced",
    ),
    "draft then final block: last one defining the name wins": (
        "```python\ndef mean(xs):\n    return 0\n```\nBetter:\n```py\n" + GOOD + "```",
        GOOD,
        "fenced",
    ),
    "block without language tag": ("Answer:\n```\n" + GOOD + "```\n", GOOD, "fenced"),
    "tilde fence": ("~~~python\n" + GOOD + "~~~\n", GOOD, "fenced"),
    "shell block ignored in favour of python": (
        "```bash\npip install numpy\n```\n```python\n" + GOOD + "```\n",
        GOOD,
        "fenced",
    ),
    "unterminated fence cut mid-statement by the token cap": (
        "```python\n" + GOOD + "\n\ndef helper(x):\n    return mean([x, x]) +",
        GOOD,
        "open_fence",
    ),
    "leading prose without fences": ("Sure! Here you go.\n\n" + GOOD, GOOD, "bare"),
    "trailing prose without fences": (
        GOOD + "\nThis function returns the mean of the list.\n",
        GOOD,
        "bare",
    ),
    "appended usage lines are dropped": (
        GOOD + "\nprint(mean([1, 2, 3]))\nassert mean([]) == 0.0\n",
        GOOD,
        "bare",
    ),
    "special tokens and CRLF": (GOOD.replace("\n", "\r\n") + "<end_of_turn><eos>", GOOD, "bare"),
    "imports kept": (
        "import math\n\n" + GOOD,
        "import math\n\n" + GOOD,
        "bare",
    ),
}


@pytest.mark.parametrize("case", FILE_CASES, ids=list(FILE_CASES))
def test_extract_code_from_messy_file_outputs(case: str) -> None:
    output, code, how = FILE_CASES[case]
    result = extract_code(output, task=file_task())
    assert result.code == code
    assert result.how == how


@pytest.mark.parametrize(
    "output",
    [
        "",
        "   \n\n",
        "<eos>",
        "I am not sure how to fix this.",
        "The function should check whether the list is empty first.\nThen divide.",
        "```python\n```",
    ],
)
def test_extract_code_returns_empty_when_nothing_usable(output: str) -> None:
    result = extract_code(output, task=file_task())
    assert result.code == ""
    assert result.how == "empty"


def test_extracted_code_with_a_real_syntax_error_is_kept_for_the_grader() -> None:
    broken = "def mean(xs)\n    return sum(xs) / len(xs)\n"
    result = extract_code(broken, task=file_task())
    assert result.code == broken
    assert result.how == "bare"


def test_trailing_calls_are_kept_when_the_starter_has_top_level_calls() -> None:
    starter = "import logging\n\nlogging.basicConfig()\n\ndef f():\n    return 1\n"
    output = "import logging\n\ndef f():\n    return 2\n\nlogging.basicConfig()\n"
    assert extract_code(output, task=file_task(starter)).code == output


def test_expected_names_come_from_the_starter_and_entry_point() -> None:
    assert expected_names(file_task("class A:\n    pass\n\ndef f():\n    pass\n")) == ("A", "f")
    assert expected_names(completion_task()) == ("below_zero",)
    assert expected_names(file_task("def broken(:\n")) == ("broken",)


COMPLETION_CASES: dict[str, tuple[str, str, str]] = {
    "clean body": (BODY, HUMANEVAL_PROMPT + BODY, "completion"),
    "body then a new top-level def": (
        BODY + "\n\ndef check(candidate):\n    assert candidate([1]) is False\n",
        HUMANEVAL_PROMPT + BODY,
        "completion",
    ),
    "body then if __name__": (
        BODY + "\n\nif __name__ == '__main__':\n    print(below_zero([1]))\n",
        HUMANEVAL_PROMPT + BODY,
        "completion",
    ),
    "body then closing fence and prose": (
        BODY + "```\n\nThe function keeps a running balance.",
        HUMANEVAL_PROMPT + BODY,
        "completion",
    ),
    "body cut mid-statement by the token cap": (
        BODY + "    # unreachable\n    x = (1 +",
        HUMANEVAL_PROMPT + BODY + "    # unreachable\n",
        "completion",
    ),
    "body with a helper it calls": (
        "    return _dips(operations)\n\n\ndef _dips(ops):\n    return min(ops) < 0\n\n\n"
        "print(1)\n",
        HUMANEVAL_PROMPT
        + "    return _dips(operations)\n\n\ndef _dips(ops):\n    return min(ops) < 0\n",
        "completion",
    ),
}


@pytest.mark.parametrize("case", COMPLETION_CASES, ids=list(COMPLETION_CASES))
def test_extract_completion_continues_the_prompt(case: str) -> None:
    output, code, how = COMPLETION_CASES[case]
    result = extract_code(output, task=completion_task())
    assert result.code == code
    assert result.how == how
    ast.parse(result.code)


def test_completion_rewrite_of_the_whole_function_is_used() -> None:
    rewrite = "def below_zero(operations):\n" + BODY
    output = "```python\n" + rewrite + "```\n"
    result = extract_code(output, task=completion_task())
    assert result.how == "completion_rewrite"
    assert result.code.startswith(HUMANEVAL_PROMPT.rstrip())
    assert result.code.endswith(rewrite)
    namespace: dict[str, object] = {}
    exec(compile(result.code, "solution.py", "exec"), namespace)
    below_zero = namespace["below_zero"]
    assert callable(below_zero)
    assert below_zero([1, 2, -4, 5]) is True


def test_completion_of_a_prompt_without_trailing_newline_keeps_the_first_line() -> None:
    prompt = HUMANEVAL_PROMPT.rstrip("\n")
    result = extract_code("\n" + BODY, task=completion_task(prompt))
    assert result.code == prompt + "\n" + BODY


@pytest.mark.parametrize("output", ["", "\n\n", "    # TODO\n", "def other():\n    pass\n"])
def test_completion_without_a_body_is_empty(output: str) -> None:
    assert extract_code(output, task=completion_task()).how == "empty"


# --- plans and feedback ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "steps"),
    [
        (
            "1. Check if the list is empty.\n2. Return 0.0 if so.\n3. Else divide.",
            ["Check if the list is empty.", "Return 0.0 if so.", "Else divide."],
        ),
        (
            "1. Check emptiness.\n2) Divide.\n- Return.\n* Test.\nStep 5: Done.",
            ["Check emptiness.", "Divide.", "Return.", "Test.", "Done."],
        ),
        # The prompt ended with "1." and the router prepends it.
        (
            "1. Guard the empty list.\n2. Keep the rest.\n\n## Code",
            ["Guard the empty list.", "Keep the rest."],
        ),
        # ...or forgets to: the first line is still a step.
        (" Guard the empty list.\n2. Keep the rest.", ["Guard the empty list.", "Keep the rest."]),
        ("## Plan\n1. Guard.\n```python\nx = 1\n```", ["Guard."]),
        ("1. Loop.\n2. Loop.\n3. Loop.\n4. Return.", ["Loop.", "Return."]),
        ("1. Use 1.5 as factor.", ["Use 1.5 as factor."]),
        ("", []),
    ],
)
def test_extract_plan(output: str, steps: list[str]) -> None:
    assert extract_plan(output) == steps


def test_extract_plan_caps_a_looping_model() -> None:
    output = "\n".join(f"{i}. Print number {i}." for i in range(1, 100))
    assert len(extract_plan(output)) == MAX_PLAN_STEPS


# --- answers of instruct models (chat) ----------------------------------------------------

INSTRUCT_ANSWERS = [
    pytest.param(
        "Here is the corrected code:\n\n```python\n" + GOOD + "```\n\nThis handles empty lists.",
        id="prose-around-one-block",
    ),
    pytest.param(
        "```python\n" + GOOD + "```\n\nUsage:\n\n```python\nprint(mean([1, 2, 3]))\n```\n",
        id="solution-then-usage-block",
    ),
    pytest.param(
        "First, the old version:\n```python\nx = mean\n```\nThe fix:\n```python\n" + GOOD + "```",
        id="fragment-then-solution-block",
    ),
    pytest.param(
        "```\n" + GOOD + "```\nDone.",
        id="unlabelled-fence",
    ),
    pytest.param(
        "```python\n" + GOOD + "\n\n# The function now returns 0.0 for",
        id="fence-cut-by-the-token-cap",
    ),
]


@pytest.mark.parametrize("answer", INSTRUCT_ANSWERS)
def test_the_solution_block_of_an_instruct_answer_is_picked(answer: str) -> None:
    result = extract_code(answer, task=file_task())
    assert ast.dump(ast.parse(result.code)) == ast.dump(ast.parse(GOOD))


def test_a_chat_answer_continuing_the_opened_function_keeps_the_prompt() -> None:
    """Chat prompts for completion tasks open the answer with the function; the model writes
    the body and the closing fence is the stop sequence."""
    task = completion_task()
    result = extract_code(BODY, task=task)
    assert result.code == HUMANEVAL_PROMPT + BODY


# --- hostile output never raises -------------------------------------------------------------

DEEP = [
    "x = " + "1+" * 1500 + "1",
    "```python\nx = " + "-" * 3000 + "1\n```",
    "def mean(xs):\n    return " + "not " * 3000 + "xs\n",
    "def below_zero(operations):\n    return " + "(" * 300 + "0" + ")" * 300 + "\n",
]


@pytest.mark.parametrize("output", DEEP)
def test_deeply_nested_output_is_extracted_or_refused_without_raising(output: str) -> None:
    for task in (file_task(), completion_task()):
        result = extract_code(output, task=task)
        assert result.how in {
            "empty",
            "bare",
            "fenced",
            "open_fence",
            "completion",
            "before_fence",
            "completion_rewrite",
        }


@given(st.text(alphabet=st.sampled_from("def ():\n\t `#\"'x=1[]{}+-*_"), max_size=400))
@settings(max_examples=200, deadline=None)
def test_any_output_is_extracted_without_raising(output: str) -> None:
    extract_code(output, task=file_task())
    extract_code(output, task=completion_task())
    extract_plan(output)
