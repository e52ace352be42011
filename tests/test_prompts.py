"""Prompts: stable prefix across retries, feedback only in the variable part, budgets."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import msgspec
import pytest

from swapos.capsule.schema import (
    Artifact,
    Capsule,
    CapsuleBudgetError,
    Feedback,
    with_artifact,
    with_feedback,
    with_plan,
    with_verdict,
)
from swapos.data.task import Task, TaskMeta
from swapos.pipeline.prompts import (
    CODE_STOP,
    COMPLETION_STOP,
    Phase,
    Prompt,
    build_prompt,
    capsule_for_task,
)

STARTER = "def mean(xs):\n    return sum(xs) / len(xs)\n"
HUMANEVAL_PROMPT = (
    'def add_one(x: int) -> int:\n    """Return x plus one.\n    >>> add_one(1)\n    2\n    """\n'
)


def count_words(text: str) -> int:
    return len(text.split())


def bugfix_task() -> Task:
    return Task(
        meta=TaskMeta(task_id="bugfix/mean", category="bugfix", difficulty=2),
        root="",
        problem="`mean([])` crashes; make it return 0.0.",
        starter=STARTER,
        tests={"test_mean.py": "SECRET TEST SOURCE"},
        reference="SECRET REFERENCE",
    )


def completion_task() -> Task:
    return Task(
        meta=TaskMeta(task_id="HumanEval/99", category="completion"),
        root="",
        problem=HUMANEVAL_PROMPT,
        starter=HUMANEVAL_PROMPT,
        tests={},
        entry_point="add_one",
    )


def after_attempt(capsule: Capsule, attempt: int) -> Capsule:
    """Add a failed attempt with grader output."""
    code = f"def mean(xs):\n    return sum(xs) / (len(xs) + {attempt})\n"
    capsule = with_artifact(capsule, Artifact(attempt=attempt, phase="code", code=code))
    capsule = with_verdict(capsule, attempt=attempt, passed=False)
    return with_feedback(
        capsule,
        Feedback(
            attempt=attempt,
            source="grader",
            text=f"FAILED test_mean.py::test_value - assert {attempt} == 2.0",
            tests_passed=1,
            tests_total=2,
        ),
    )


def retry_prompts(task: Task, phase: Phase = "code", budget: int = 1500) -> list[Prompt]:
    """The prompts of ``phase`` for attempts 1, 2 and 3."""
    capsule = with_plan(capsule_for_task(task), ["Guard the empty list.", "Divide."])
    prompts = []
    for attempt in (1, 2, 3):
        if phase == "code" or attempt > 1:
            prompts.append(build_prompt(phase, task, capsule, count_words, budget))
        capsule = after_attempt(capsule, attempt)
    return prompts


@pytest.mark.parametrize("make_task", [bugfix_task, completion_task])
def test_stable_part_is_identical_across_attempts(make_task: Callable[[], Task]) -> None:
    task = make_task()
    first, second, third = retry_prompts(task)
    assert first.stable == second.stable == third.stable
    assert first.text.startswith(first.stable)
    assert second.variable != third.variable


def test_stable_part_holds_brief_starter_and_plan_and_no_feedback() -> None:
    _, _, third = retry_prompts(bugfix_task())
    assert "`mean([])` crashes" in third.stable
    assert STARTER.strip() in third.stable
    assert "1. Guard the empty list." in third.stable
    for volatile in ("FAILED", "Attempt", "len(xs) + 2"):
        assert volatile not in third.stable
    assert "assert 2 == 2.0" in third.variable
    assert "len(xs) + 2" in third.variable
    assert "(len(xs) + 1)" in third.variable  # earlier attempts stay whole: append-only


def test_hidden_test_and_reference_never_reach_the_prompt() -> None:
    phases: tuple[Phase, ...] = ("reason", "code")
    for phase in phases:
        for prompt in retry_prompts(bugfix_task(), phase):
            assert "SECRET" not in prompt.text


def test_code_prompt_ends_with_an_open_fence_and_stops_at_its_close() -> None:
    first, second, _ = retry_prompts(bugfix_task())
    assert first.text.endswith("## solution.py\n```python\n")
    assert second.text.endswith("## Fixed solution.py\n```python\n")
    assert first.stop == CODE_STOP == ("\n```",)


def test_completion_prompt_ends_with_the_function_prompt() -> None:
    for prompt in retry_prompts(completion_task()):
        assert prompt.text.endswith("```python\n" + HUMANEVAL_PROMPT)
        assert prompt.variable.endswith(HUMANEVAL_PROMPT)
        assert prompt.stop == COMPLETION_STOP
        assert "\ndef " in prompt.stop
    # The brief is the function prompt itself: it is not repeated in the stable part.
    assert HUMANEVAL_PROMPT not in retry_prompts(completion_task())[0].stable


def test_reason_prompt_shows_brief_and_starter_and_cues_a_numbered_plan() -> None:
    capsule = capsule_for_task(bugfix_task())
    prompt = build_prompt("reason", bugfix_task(), capsule, count_words, 1000)
    assert prompt.text.endswith("## Plan\n1.")
    assert prompt.answer_prefix == "1."
    assert STARTER.strip() in prompt.stable
    assert "\n\n" in prompt.stop
    code = build_prompt("code", bugfix_task(), capsule, count_words, 1000)
    assert code.stable.startswith(prompt.stable)


def test_prompt_stays_within_budget_for_a_long_history() -> None:
    task = bugfix_task()
    capsule = with_plan(capsule_for_task(task), ["Guard the empty list."])
    for attempt in range(1, 31):
        capsule = after_attempt(capsule, attempt)
    prompt = build_prompt("code", task, capsule, count_words, 200)
    assert count_words(prompt.text) <= 200
    assert "len(xs) + 30" in prompt.text
    assert task.problem in prompt.stable
    assert prompt.dropped


def test_prompt_budget_error_when_the_fixed_part_does_not_fit() -> None:
    capsule = capsule_for_task(bugfix_task())
    with pytest.raises(CapsuleBudgetError, match="budget is 10"):
        build_prompt("code", bugfix_task(), capsule, count_words, 10)


def test_unknown_phase_is_rejected() -> None:
    capsule = capsule_for_task(bugfix_task())
    with pytest.raises(ValueError, match="no prompt for phase 'grade'"):
        build_prompt("grade", bugfix_task(), capsule, count_words, 1000)  # type: ignore[arg-type]


def test_prompt_round_trips_through_msgspec() -> None:
    prompt = retry_prompts(bugfix_task())[1]
    assert msgspec.json.decode(msgspec.json.encode(prompt), type=Prompt) == prompt


def test_capsule_for_task_takes_goal_and_constraints_from_the_task() -> None:
    capsule = capsule_for_task(bugfix_task())
    assert capsule.goal == "`mean([])` crashes; make it return 0.0."
    assert capsule.meta.task_id == "bugfix/mean"
    assert capsule.constraints
    assert capsule_for_task(completion_task()).constraints == ()


def test_stable_part_survives_compression_of_the_history() -> None:
    task = bugfix_task()
    roomy = retry_prompts(task)
    budget = count_words(roomy[2].text) - 5
    first, second, third = retry_prompts(task, budget=budget)
    assert third.dropped
    assert "plan" not in third.dropped
    assert first.stable == second.stable == third.stable == roomy[0].stable
    assert count_words(third.text) <= budget


def run_retries(task: Task, budget: int = 10_000) -> list[str]:
    """Code prompts of three attempts as the conductor builds them, with each answer
    appended as the model wrote it."""
    capsule = with_plan(capsule_for_task(task), ["Guard the empty list.", "Divide."])
    codes: list[str] = []
    for attempt in (1, 2, 3):
        code = build_prompt("code", task, capsule, count_words, budget)
        body = f"def mean(xs):\n    return sum(xs) / (len(xs) + {attempt})"
        written = body if task.category != "completion" else f"    return x + {attempt}"
        codes.append(code.text + written)
        artifact = written if task.category != "completion" else task.starter + written
        capsule = with_artifact(capsule, Artifact(attempt=attempt, phase="code", code=artifact))
        capsule = with_verdict(capsule, attempt=attempt, passed=False)
        capsule = with_feedback(
            capsule,
            Feedback(attempt=attempt, source="grader", text=f"FAILED - assert {attempt} == 2.0",
                     tests_passed=1, tests_total=2),
        )  # fmt: skip
    return codes


@pytest.mark.parametrize("make_task", [bugfix_task, completion_task])
def test_retry_prompt_begins_with_the_previous_prompt_and_answer(
    make_task: Callable[[], Task],
) -> None:
    codes = run_retries(make_task())
    for previous_prompt_and_answer, after in itertools.pairwise(codes):
        assert after.startswith(previous_prompt_and_answer)
    assert codes[2].count("```python\n") == 3 + (make_task is bugfix_task)  # + the starter


def test_tight_budget_collapses_whole_attempts_oldest_first_and_keeps_the_plan() -> None:
    task = bugfix_task()
    capsule = with_plan(capsule_for_task(task), ["Guard the empty list.", "Divide."])
    for attempt in (1, 2, 3):
        capsule = after_attempt(capsule, attempt)
    roomy = build_prompt("code", task, capsule, count_words, 10_000)
    assert not roomy.dropped and "(len(xs) + 1)" in roomy.variable
    budget = count_words(roomy.text) - 5
    tight = build_prompt("code", task, capsule, count_words, budget)
    assert tight.dropped == ("attempt 1 whole",)
    assert "- attempt 1: failed" in tight.variable  # a summary line instead
    assert "(len(xs) + 1)" not in tight.text
    assert "(len(xs) + 2)" in tight.variable and "(len(xs) + 3)" in tight.variable
    assert tight.stable == roomy.stable
    assert count_words(tight.text) <= budget


def test_a_recap_shows_each_failed_answer_once_in_one_user_turn() -> None:
    """A recap asks afresh: one user turn with the brief, every failed answer (an identical
    one named, not shown again) and its outcome; no assistant turn to copy."""
    from swapos.models.templates import CHATML, ChatFormat, decode_messages
    from swapos.pipeline.chat_prompts import build_chat_prompt

    task = bugfix_task()
    capsule = after_attempt(capsule_for_task(task), 1)
    again = capsule.artifacts[0].code.replace("return", "return  ")  # the same code
    capsule = with_artifact(capsule, Artifact(attempt=2, phase="code", code=again))
    capsule = with_verdict(capsule, attempt=2, passed=False)
    fb = Feedback(attempt=2, source="grader", text="FAILED AGAIN", tests_passed=0, tests_total=2)
    capsule = with_feedback(capsule, fb)
    fmt = ChatFormat(template=CHATML, messages=True)
    recap = build_chat_prompt("code", task, capsule, count_words, 5000, fmt, recap=True)
    messages = decode_messages(recap.text)
    assert [m.role for m in messages] == ["system", "user"]
    turn = messages[1].content
    assert turn.startswith("`mean([])` crashes; make it return 0.0.")  # the stable part first
    assert turn.count("(len(xs) + 1)") == 1  # shown once ...
    assert "Attempt 2: the same code as attempt 1." in turn  # ... and named when repeated
    assert "assert 1 == 2.0" in turn and "FAILED AGAIN" in turn
    assert turn.index("Attempt 1:") < turn.index("Attempt 2:") < turn.index("FAILED AGAIN")
    assert turn.endswith(
        "None of these passed. Write a different answer that passes the tests. Reply with the "
        "corrected complete solution.py in one ```python code block."
    )
    assert "SECRET" not in recap.text
    plain = build_chat_prompt("code", task, capsule, count_words, 5000, fmt)
    assert [m.role for m in decode_messages(plain.text)][1:4] == ["user", "assistant", "user"]
