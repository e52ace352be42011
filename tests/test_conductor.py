"""The pipeline conducted by the Router: fake models, the real sandboxed grader."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from swapos.backends.fake_script import FakeModelScript
from swapos.capsule.schema import CAPSULE_VERSION, decode_capsule
from swapos.data.task import Task, TaskMeta
from swapos.models.profile import ModelConfig, PipelineConfig, Profile
from swapos.pipeline.identity import candidate_identity
from swapos.testing import FakeClock
from tests.fakes import DOCTEST_TASK, PLAIN, fake_system

pytestmark = pytest.mark.anyio

TASK = Task(
    meta=TaskMeta(task_id="add", category="bugfix", difficulty=2, description="fix add"),
    root="",
    problem="`add(a, b)` should return the sum of a and b.",
    starter="def add(a, b):\n    return a - b\n",
    tests={
        "test_add.py": "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    },
)
GOOD = "def add(a, b):\n    return a + b\n```"
BAD = "def add(a, b):\n    return a * b\n```"
BAD2 = "def add(a, b):\n    return a - b - 1\n```"


def scripts(
    code_reply: str | tuple[str, ...], chat_template: str | None = None
) -> dict[str, FakeModelScript]:
    replies = code_reply if isinstance(code_reply, tuple) else (code_reply,)
    return {
        "planner": FakeModelScript(load_s=1.0, token_s=0.05, reply="Return a plus b.\n\n"),
        "coder": FakeModelScript(
            load_s=1.0, token_s=0.05, replies=replies, chat_template=chat_template
        ),
    }


def profile(max_attempts: int = 2, **pipeline: Any) -> Profile:
    names = ["planner", "coder"]
    return Profile(
        name="fake",
        budget=1000,
        models={n: ModelConfig(path=f"/nonexistent/{n}.gguf", n_ctx=4096) for n in names},
        roles={"reason": "planner", "code": "coder"},
        pipeline=PipelineConfig(**{**PLAIN, "max_attempts": max_attempts, **pipeline}),
    )


async def run(  # type: ignore[no-untyped-def]
    code_reply: str | tuple[str, ...],
    max_attempts: int = 2,
    task: Task = TASK,
    chat_template: str | None = None,
    **pipeline: Any,
):
    clock = FakeClock()
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            fake_system(
                scripts(code_reply, chat_template),
                budget=300,
                clock=clock,
                profile=profile(max_attempts, **pipeline),
            ) as (sys, fb),
        ):
            outcome = await sys.run_task(task)
    return outcome, fb


async def test_task_passing_on_first_attempt_ends_after_one_grade() -> None:
    outcome, _ = await run(GOOD)
    result = outcome.result
    assert result.passed and result.pass_at_1 and result.iterations == 1
    assert [p.phase for p in result.phases] == ["reason", "code", "grade"]
    assert (result.tests_passed, result.tests_total) == (1, 1)


async def test_a_failing_attempt_is_retried_with_its_test_output() -> None:
    outcome, fb = await run((BAD, BAD2), max_attempts=2)
    result = outcome.result
    assert not result.passed and result.iterations == 2
    assert [p.phase for p in result.phases] == ["reason", "code", "grade", "code", "grade"]
    second_code_prompt = [text for model, text in fb.prompts if model == "coder"][1]
    assert "test_add" in second_code_prompt and "assert 6 == 5" in second_code_prompt
    assert "return a * b" in second_code_prompt
    capsule = decode_capsule(outcome.capsule_json)
    assert [f.source for f in capsule.feedback] == ["grader", "grader"]
    assert len(capsule.artifacts) == 2


async def test_stable_prefix_is_shared_by_retries() -> None:
    _, fb = await run((BAD, BAD2), max_attempts=2)
    first, second = [text for model, text in fb.prompts if model == "coder"]
    stable = first[: first.index("## solution.py")]
    assert second.startswith(stable) and "## Task" in stable


async def test_model_that_emits_nothing_ends_the_task_with_a_reason() -> None:
    outcome, _ = await run("", max_attempts=1)
    assert not outcome.result.passed
    assert outcome.result.error is None or "no code" in (outcome.result.error or "")
    capsule = decode_capsule(outcome.capsule_json)
    assert "no code" in capsule.feedback[-1].text
    assert msgspec.json.decode(outcome.capsule_json)["version"] == CAPSULE_VERSION


async def test_a_repeated_failed_candidate_is_resampled_with_a_recorded_seed() -> None:
    outcome, _ = await run((BAD, BAD, GOOD), max_attempts=2)
    result = outcome.result
    assert result.passed and not result.pass_at_1
    assert (result.passed_attempt, result.grades) == (2, 2)
    phases = [p.phase for p in result.phases]
    assert phases == ["reason", "code", "grade", "code", "code", "grade"]
    capsule = decode_capsule(outcome.capsule_json)
    resample = [d.text for d in capsule.decisions if "repeats attempt 1" in d.text]
    assert len(resample) == 1 and "seed" in resample[0] and "temperature 0.8" in resample[0]


async def test_a_candidate_that_keeps_repeating_is_never_graded_twice() -> None:
    outcome, _ = await run(BAD, max_attempts=3, resamples=1)
    result = outcome.result
    assert not result.passed and result.grades == 1
    assert [p.phase for p in result.phases].count("grade") == 1
    capsule = decode_capsule(outcome.capsule_json)
    assert "not graded again" in capsule.feedback[-1].text


CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


async def test_a_failed_selfcheck_goes_back_to_the_coder_without_a_grade() -> None:
    wrong = "def add(a, b):\n    return a * b\n```"
    right = "def add(a, b):\n    return a + b\n```"
    outcome, fb = await run((wrong, right), max_attempts=3, task=DOCTEST_TASK, chat_template=CHATML)
    result = outcome.result
    assert [p.phase for p in result.phases] == ["code", "selfcheck", "code", "grade"]
    assert result.passed and result.pass_at_1 and result.passed_attempt == 2
    retry = [text for model, text in fb.prompts if model == "coder"][1]
    assert "add(2, 3) returned 6; the docstring says 5" in retry


async def test_an_instruct_model_is_asked_in_its_chat_template() -> None:
    _, fb = await run((BAD, BAD2), max_attempts=2, chat_template=CHATML)
    first, second = [text for model, text in fb.prompts if model == "coder"]
    assert first.startswith("<|im_start|>system\n") and first.endswith("assistant\n```python\n")
    assert second.startswith(first[: -len("```python\n")])  # append-only: a retry extends it
    assert "<|im_start|>assistant\n```python\ndef add(a, b):\n    return a * b\n```" in second


def test_a_candidates_identity_ignores_docstrings_layout_and_a_redefined_stub() -> None:
    same = candidate_identity
    continuation = 'def f(x):\n    """Twice x."""\n    return 2 * x\n'
    rewrite = 'def f(x):\n    """Twice x."""\n\n\ndef f(x):\n    # doubled\n    return 2*x\n'
    assert same(continuation) == same(rewrite)
    assert same(continuation) != same("def f(x):\n    return x + x\n")
    assert same("def f(:\n") == same("def  f(:")  # unparsable: by its words
    module = '"""Half-open intervals."""\n\nimport math\n\n\ndef f(x):\n    return x\n'
    assert same(module) == same(module.split("\n", 2)[2])  # nor does the module's docstring
    assert same(module) != same('"""Half-open intervals."""\n\ndef f(x):\n    return x\n')


async def test_a_candidate_only_its_selfcheck_rejected_is_graded_when_it_comes_back() -> None:
    wrong = "def add(a, b):\n    return a * b\n```"
    outcome, _ = await run((wrong,), max_attempts=3, task=DOCTEST_TASK, chat_template=CHATML)
    result = outcome.result
    phases = [p.phase for p in result.phases]
    assert phases[:4] == ["code", "selfcheck", "code", "grade"]  # graded, not resampled
    assert result.grades >= 1 and not result.passed


async def test_draws_replace_a_first_candidate_its_examples_reject() -> None:
    wrong = "def add(a, b):\n    return a * b\n```"
    wrong2 = "def add(a, b):\n    return a - b\n```"
    right = "def add(a, b):\n    return a + b\n```"
    outcome, fb = await run(
        (wrong, wrong2, right), max_attempts=3, task=DOCTEST_TASK, chat_template=CHATML, draws=4
    )
    result = outcome.result
    assert [p.phase for p in result.phases] == [
        *("code", "selfcheck") * 3,
        "grade",
    ]
    assert result.passed and result.pass_at_1 and (result.passed_attempt, result.grades) == (1, 1)
    assert {p.attempt for p in result.phases} == {1}
    first, *drawn = [text for model, text in fb.prompts if model == "coder"]
    assert drawn == [first, first]  # drawn from the prompt the first candidate answered
    capsule = decode_capsule(outcome.capsule_json)
    assert len(capsule.artifacts) == 1 and capsule.artifacts[0].code.endswith("return a + b\n")
    assert capsule.feedback[-1].source == "grader"  # the rejected candidates left no feedback
    draws = [d.text for d in capsule.decisions if d.text.startswith("draw ")]
    assert len(draws) == 2 and all("temperature 0.8 with seed" in d for d in draws)
    assert draws[0].endswith("0/1 examples pass")
    assert draws[1].endswith("1/1 examples pass; graded in place of attempt 1's candidate")


async def test_when_no_draw_passes_the_first_candidates_failure_goes_back_to_the_coder() -> None:
    wrong = "def add(a, b):\n    return a * b\n```"
    wrong2 = "def add(a, b):\n    return a - b\n```"
    right = "def add(a, b):\n    return a + b\n```"
    outcome, fb = await run(
        (wrong, wrong, wrong2, right), max_attempts=3, task=DOCTEST_TASK, chat_template=CHATML,
        draws=2,
    )  # fmt: skip
    result = outcome.result
    assert [p.phase for p in result.phases] == [
        *("code", "selfcheck", "code", "code", "selfcheck"),
        *("code", "grade"),
    ]  # the repeated draw is not checked again
    assert result.passed and (result.passed_attempt, result.grades) == (2, 1)
    retry = [text for model, text in fb.prompts if model == "coder"][-1]
    assert "add(2, 3) returned 6; the docstring says 5" in retry  # the first candidate's
    assert "return a - b" not in retry  # drawn candidates stay out of the conversation
    capsule = decode_capsule(outcome.capsule_json)
    assert "empty or a rejected candidate again" in capsule.decisions[-2].text


async def test_a_task_passed_by_a_draw_is_counted_as_such_in_the_summary() -> None:
    from swapos.records.schema import RunInfo
    from swapos.records.summary import summarize

    wrong = "def add(a, b):\n    return a * b\n```"
    right = "def add(a, b):\n    return a + b\n```"
    drawn, _ = await run((wrong, right), task=DOCTEST_TASK, chat_template=CHATML, draws=2)
    greedy, _ = await run((right,), task=DOCTEST_TASK, chat_template=CHATML, draws=2)
    wrong2 = "def add(a, b):\n    return a - b\n```"
    fixed, _ = await run(  # the draw fails too: the fixer passes, first graded, not a draw
        (wrong, wrong2, right), task=DOCTEST_TASK, chat_template=CHATML, draws=1
    )
    assert fixed.result.pass_at_1 and fixed.result.passed_attempt == 2
    summary = summarize([drawn.result, greedy.result, fixed.result], RunInfo())
    assert (summary.tasks_passed, summary.pass_at_1, summary.draw_rescued) == (3, 1.0, 1)
    assert summary.retry_rescued == 0


async def second_opinion_run(  # type: ignore[no-untyped-def]
    code: tuple[str, ...], fix: tuple[str, ...], task: Task = TASK, **pipeline: Any
):
    """``task`` with a ``fixer`` model distinct from the coder, in ChatML."""
    models = scripts(code, CHATML)
    models["fixer"] = FakeModelScript(load_s=1.0, token_s=0.05, replies=fix, chat_template=CHATML)
    models["planner"] = msgspec.structs.replace(models["planner"], chat_template=CHATML)
    base = profile(3, **pipeline)
    roles = {**base.roles, "fix": "fixer"}
    names = [*base.models, "fixer"]
    prof = msgspec.structs.replace(
        base,
        roles=roles,
        models={n: ModelConfig(path=f"/nonexistent/{n}.gguf", n_ctx=4096) for n in names},
    )
    clock = FakeClock()
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            fake_system(models, budget=400, clock=clock, profile=prof) as (sys, fb),
        ):
            outcome = await sys.run_task(task)
    return outcome, fb


async def test_a_second_opinion_answers_the_first_prompt_without_the_failed_candidate() -> None:
    outcome, fb = await second_opinion_run((BAD,), (GOOD,), second_opinion=True)
    result = outcome.result
    assert [p.phase for p in result.phases] == ["reason", "code", "grade", "code", "grade"]
    assert result.passed and (result.passed_attempt, result.grades) == (2, 2)
    (first,) = [text for model, text in fb.prompts if model == "coder"]
    (second,) = [text for model, text in fb.prompts if model == "fixer"]
    assert second == first  # the task's first prompt, as the coder read it
    assert "return a * b" not in second
    capsule = decode_capsule(outcome.capsule_json)
    assert any(d.text.startswith("attempt 2 is a second opinion: fixer") for d in capsule.decisions)
    assert [a.attempt for a in capsule.artifacts] == [1, 2]


async def test_after_a_failed_second_opinion_the_fixer_fixes() -> None:
    outcome, fb = await second_opinion_run((BAD,), (BAD2, GOOD), second_opinion=True)
    result = outcome.result
    assert [p.phase for p in result.phases] == [
        *("reason", "code", "grade", "code", "grade"),
        *("code", "grade"),
    ]
    assert result.passed and result.passed_attempt == 3
    fix = [text for model, text in fb.prompts if model == "fixer"][-1]
    assert "test_add" in fix and "return a - b - 1" in fix


async def test_no_second_opinion_without_the_option() -> None:
    outcome, _ = await second_opinion_run((BAD,), (GOOD,))
    phases = [p.phase for p in outcome.result.phases]
    assert phases == ["reason", "code", "grade", "code", "grade"]


UNCHANGED = "def add(a, b):\n    return a - b\n```"  # TASK's starter, as it was


async def test_a_candidate_that_leaves_the_starter_unchanged_goes_back_without_a_grade() -> None:
    outcome, fb = await run((UNCHANGED, GOOD), max_attempts=3)
    result = outcome.result
    assert [p.phase for p in result.phases] == ["reason", "code", "code", "grade"]
    assert result.passed and (result.passed_attempt, result.grades) == (2, 1)
    retry = [text for model, text in fb.prompts if model == "coder"][1]
    assert "solution.py unchanged" in retry


async def test_draws_replace_a_first_candidate_that_changed_nothing() -> None:
    outcome, fb = await run((UNCHANGED, GOOD), max_attempts=3, draws=2)
    result = outcome.result
    assert [p.phase for p in result.phases] == ["reason", "code", "code", "grade"]
    assert result.passed and result.pass_at_1 and result.passed_attempt == 1
    first, drawn = [text for model, text in fb.prompts if model == "coder"]
    assert drawn == first
    capsule = decode_capsule(outcome.capsule_json)
    said = [d.text for d in capsule.decisions if d.text.startswith("draw ")]
    assert said == [said[0]] and said[0].endswith(
        "nothing to check; graded in place of attempt 1's candidate"
    )


async def test_a_second_opinion_that_fails_its_check_is_replaced_by_its_own_draw() -> None:
    # The coder's answer and its draw leave solution.py unchanged (the self-check budget is
    # spent); the second opinion does too, and is checked anyway: the fixer's draw is graded.
    outcome, fb = await second_opinion_run(
        (UNCHANGED,), (UNCHANGED, GOOD), second_opinion=True, draws=1
    )
    result = outcome.result
    assert [p.phase for p in result.phases] == [
        *("reason", "code", "code"),  # the coder's answer and its draw
        *("code", "code", "grade"),  # the second opinion and its draw
    ]
    assert result.passed and (result.passed_attempt, result.grades) == (2, 1)
    opinion, drawn = [text for model, text in fb.prompts if model == "fixer"]
    assert drawn == opinion  # drawn from the prompt the second opinion answered
    capsule = decode_capsule(outcome.capsule_json)
    said = [d.text for d in capsule.decisions if d.text.startswith("draw ")]
    assert said[-1].endswith("nothing to check; graded in place of attempt 2's candidate")
    assert [a.attempt for a in capsule.artifacts] == [1, 2]
    assert "return a + b" in capsule.artifacts[-1].code


async def test_a_second_opinion_none_of_whose_draws_passes_is_graded_as_it_is() -> None:
    outcome, _ = await second_opinion_run(
        (UNCHANGED,), (UNCHANGED, UNCHANGED, GOOD), second_opinion=True, draws=1
    )
    result = outcome.result
    assert [p.phase for p in result.phases] == [
        *("reason", "code", "code", "code", "code", "grade"),
        *("code", "grade"),  # fixed as before
    ]
    assert result.passed and (result.passed_attempt, result.grades) == (3, 2)
    said = [d.text for d in decode_capsule(outcome.capsule_json).decisions]
    assert "no draw passes the checks: attempt 2 is graded as it is" in said


async def test_a_second_opinion_that_repeats_the_failure_is_followed_by_the_fixer() -> None:
    outcome, fb = await second_opinion_run(
        (BAD,), (BAD, BAD, BAD, GOOD), second_opinion=True, resamples=1
    )
    result = outcome.result
    assert [p.phase for p in result.phases] == [
        *("reason", "code", "grade"),
        *("code", "code", "code"),  # the second opinion, in a recap, resampled: BAD
        *("code", "grade"),
    ]
    assert result.passed and (result.passed_attempt, result.grades) == (3, 2)
    fix = [text for model, text in fb.prompts if model == "fixer"][-1]
    assert "Identical to attempt 1, which failed; not graded again." in fix


async def test_a_fixer_that_keeps_repeating_a_failure_hands_the_attempt_to_the_coder() -> None:
    outcome, fb = await second_opinion_run((BAD, GOOD), (BAD,), resamples=1)
    result = outcome.result
    assert [p.phase for p in result.phases] == [
        *("reason", "code", "grade"),
        *("code", "code", "code", "code", "grade"),  # fixer, in a recap, resampled; the coder
    ]
    assert result.passed and (result.passed_attempt, result.grades) == (2, 2)
    assert [model for model, _ in fb.prompts if model in {"coder", "fixer"}] == [
        *("coder", "fixer", "fixer", "fixer", "coder"),
    ]
    capsule = decode_capsule(outcome.capsule_json)
    said = [d.text for d in capsule.decisions]
    assert (
        "attempt 2 repeats attempt 1: asking fixer again in a recap of the failed answers" in said
    )
    assert (
        "attempt 2 repeats attempt 1: asking coder instead in a recap of the failed answers" in said
    )


async def test_a_chat_fixer_that_repeats_its_failed_answer_is_asked_again_in_a_recap() -> None:
    outcome, fb = await second_opinion_run((BAD,), (BAD, GOOD), resamples=1)
    result = outcome.result
    assert [p.phase for p in result.phases] == [
        *("reason", "code", "grade", "code", "code", "grade"),
    ]
    assert result.passed and (result.passed_attempt, result.grades) == (2, 2)
    in_conversation, recap = [text for model, text in fb.prompts if model == "fixer"]
    # The conversation shows the failed code as the model's own turn; the recap shows it once,
    # in the user's turn, with its test output, and asks for a different answer.
    assert "<|im_start|>assistant\n```python\ndef add(a, b):\n    return a * b" in in_conversation
    assert recap.count("<|im_start|>user") == 1 and recap.count("<|im_start|>assistant") == 1
    assert recap.count("return a * b") == 1
    assert "Attempt 1:" in recap and "test_add" in recap
    assert recap.endswith(
        "Write a different answer that passes the tests. Reply with the "
        "corrected complete solution.py in one ```python code block.<|im_end|>\n"
        "<|im_start|>assistant\n```python\n"
    )
    stable = in_conversation[: in_conversation.index("Reply with")]
    assert recap.startswith(stable)  # the brief first: the KV prefix cache keeps it


async def test_a_base_model_is_never_asked_in_a_recap() -> None:
    outcome, _ = await run((BAD, BAD, GOOD), max_attempts=2, resamples=1)
    assert [p.phase for p in outcome.result.phases] == [
        *("reason", "code", "grade", "code", "code", "grade"),
    ]
    capsule = decode_capsule(outcome.capsule_json)
    assert not any("recap" in d.text for d in capsule.decisions)


async def test_an_unchanged_candidate_is_graded_once_the_check_budget_is_spent() -> None:
    # The second unchanged answer is graded (selfcheck_retries=1 is spent): the fixer then
    # sees which tests fail, which "unchanged" alone does not tell it.
    outcome, fb = await run((UNCHANGED, UNCHANGED, GOOD), max_attempts=3)
    result = outcome.result
    assert [p.phase for p in result.phases] == [
        *("reason", "code", "code", "grade", "code", "grade"),
    ]
    assert result.passed and (result.passed_attempt, result.grades) == (3, 2)
    fix = [text for model, text in fb.prompts if model == "coder"][-1]
    assert "test_add" in fix  # the failing test, from the grade of the unchanged answer


WRONG_EXAMPLE_TASK = msgspec.structs.replace(
    DOCTEST_TASK,
    starter=(
        'def add(a, b):\n    """Add.\n    >>> add(2, 3)\n    5\n    >>> add(1, 1)\n    3\n    """\n'
    ),
)
"""Its second docstring example is wrong (as HumanEval_116's and 130's are): add(1, 1) is 2."""


async def test_an_example_every_candidate_of_both_models_answers_alike_is_not_obeyed() -> None:
    right = ("def add(a, b):\n    return a + b\n```", "def add(a, b):\n    return b + a\n```")
    fixed = "def add(a, b):\n    return sum((a, b))\n```"
    outcome, _ = await second_opinion_run(
        right, (fixed,), task=WRONG_EXAMPLE_TASK, second_opinion=True, draws=1
    )
    result = outcome.result
    assert result.passed and result.grades == 1, result.phases
    said = [d.text for d in decode_capsule(outcome.capsule_json).decisions]
    assert any(t.startswith("distrusted: add(1, 1) == 3") for t in said), said
    checks = [p.phase for p in result.phases].count("selfcheck")
    assert checks == 3  # a candidate of each model, and a draw, were checked first


async def test_an_example_that_only_one_model_fails_is_still_obeyed() -> None:
    right = ("def add(a, b):\n    return a + b\n```", "def add(a, b):\n    return b + a\n```")
    outcome, _ = await run(right, max_attempts=3, task=WRONG_EXAMPLE_TASK, chat_template=CHATML)
    said = [d.text for d in decode_capsule(outcome.capsule_json).decisions]
    assert not any(t.startswith("distrusted") for t in said), said
