"""Retry rules 3 (critic off), 10 (the best candidate), 11 (focus) and 12 (checked reviews),
conducted end to end: fake models, the real sandboxed grader."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from swapos.capsule.schema import decode_capsule
from swapos.data.task import Task, TaskMeta
from swapos.messages.events import RouterDecided
from swapos.models.profile import Profile
from swapos.pipeline.routing import route
from swapos.policies.retry import REDRAWN
from swapos.testing import FakeClock
from tests.fakes import fake_system
from tests.test_conductor import CHATML, GOOD, TASK, UNCHANGED, profile, scripts

pytestmark = pytest.mark.anyio

FOUR = Task(
    meta=TaskMeta(task_id="add4", category="bugfix", difficulty=2, description="fix add"),
    root="",
    problem="`add(a, b)` should return the sum of a and b.",
    starter="def add(a, b):\n    return a - b\n",
    tests={
        "test_add.py": (
            "from solution import add\n\n\n"
            + "".join(
                f"def test_{i}():\n    assert add({a}, {b}) == {a + b}\n\n\n"
                for i, (a, b) in enumerate([(2, 3), (0, 0), (-1, 1), (-2, -3)])
            )
        )
    },
)
BEST = "def add(a, b):\n    return a + b if a >= 0 else 0\n```"  # 3 of 4 tests pass
WORSE = "def add(a, b):\n    return a * b\n```"  # 1 of 4
WORSE2 = "def add(a, b):\n    return a - b - 0\n```"  # 1 of 4


async def run(  # type: ignore[no-untyped-def]
    replies: tuple[str, ...],
    *,
    task: Task = TASK,
    max_attempts: int = 3,
    chat_template: str | None = None,
    review: str | None = None,
    roles: dict[str, str] | None = None,
    **pipeline: Any,
):
    models = scripts(replies, chat_template)
    if chat_template is not None:
        for name in ("planner", "critic"):
            models[name] = msgspec.structs.replace(models[name], chat_template=chat_template)
    if review is not None:
        models["critic"] = msgspec.structs.replace(models["critic"], reply=review)
    decided: list[str] = []

    def on_event(event: object) -> None:
        if isinstance(event, RouterDecided):
            decided.append(event.text)

    clock = FakeClock()
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            fake_system(
                models, budget=300, clock=clock,
                profile=with_roles(profile(max_attempts, **pipeline), roles or {}),
                on_event=on_event,
            ) as (sys, fb),
        ):  # fmt: skip
            outcome = await sys.run_task(task)
    return outcome, fb, decided


def with_roles(prof: Profile, roles: dict[str, str]) -> Profile:
    return msgspec.structs.replace(prof, roles={**prof.roles, **roles})


def coder_prompts(fb: Any) -> list[str]:
    return [text for model, text in fb.prompts if model == "coder"]


async def test_the_fixer_starts_from_the_best_candidate_and_the_task_ends_on_it() -> None:
    outcome, fb, decided = await run((BEST, WORSE, WORSE2), task=FOUR)
    result = outcome.result
    assert not result.passed and result.grades == 3
    # The result is attempt 1's (3/4), not the newest's (1/4): before rule 10 it was 1/4.
    assert (result.tests_passed, result.tests_total) == (3, 4)
    third = coder_prompts(fb)[-1]
    start = third.index("## Start again from attempt 1")
    assert "return a + b if a >= 0 else 0" in third[start:]
    assert third.index("return a * b") < start  # the newest outcome first, then the best
    capsule = decode_capsule(outcome.capsule_json)
    assert capsule.artifacts[-1].attempt == 1 and "a >= 0" in capsule.artifacts[-1].code
    said = [d.text for d in capsule.decisions]
    assert said == decided
    assert (
        "attempt 3 starts from attempt 1's candidate (3/4 tests passed), the best graded, "
        "not from attempt 2's (1/4 tests passed)" in said
    )
    assert said[-1] == (
        "the task's result is attempt 1's candidate (3/4 tests passed), its best graded, "
        "not attempt 3's"
    )


async def test_with_the_critic_off_no_review_is_asked() -> None:
    outcome, fb, _ = await run((WORSE, GOOD), critic=False)
    result = outcome.result
    assert result.passed and result.passed_attempt == 2
    assert [p.phase for p in result.phases] == ["reason", "code", "grade", "code", "grade"]
    assert not [model for model, _ in fb.prompts if model == "critic"]
    assert "test_add" in coder_prompts(fb)[-1]  # the fixer reads the test output alone


async def test_a_starter_answered_again_is_fixed_from_a_focus_prompt() -> None:
    outcome, fb, _ = await run((UNCHANGED, UNCHANGED, GOOD), chat_template=CHATML, focus_fix=True)
    result = outcome.result
    assert result.passed and result.passed_attempt == 3
    phases = [p.phase for p in result.phases]
    assert phases == ["reason", "code", "code", "grade", "critic", "code", "grade"]
    focus = coder_prompts(fb)[-1]
    turn = focus[focus.rindex("<|im_start|>user\n") + len("<|im_start|>user\n") :]
    assert turn.startswith("This fails: assert add(2, 3) == 5  ->  assert -1 == 5\n")
    assert "Make the smallest change to solution.py that makes this one test pass" in turn
    assert focus.count("<|im_start|>user") == 1  # one turn, not the conversation
    said = [d.text for d in decode_capsule(outcome.capsule_json).decisions]
    assert "attempt 2's candidate is stuck: attempt 3 is asked in a focus prompt" in said


async def test_without_focus_fix_a_starter_again_is_fixed_in_the_conversation() -> None:
    _, fb, _ = await run((UNCHANGED, UNCHANGED, GOOD), chat_template=CHATML)
    assert coder_prompts(fb)[-1].count("<|im_start|>user") > 1
    assert "This fails:" not in coder_prompts(fb)[-1]


async def test_a_review_the_test_output_contradicts_reaches_the_fixer_marked() -> None:
    review = "The test fails because negative numbers are not handled.\n\n"
    outcome, fb, decided = await run(
        (WORSE, GOOD), chat_template=CHATML, review=review, check_reviews=True
    )
    assert outcome.result.passed
    fix = coder_prompts(fb)[-1]
    marked = (
        "Unverified: It names the case negative numbers, which no failing test's output "
        "shows. The test output above decides.\nThe test fails because negative numbers"
    )
    assert marked in fix and fix.index("test_add") < fix.index(marked)
    assert any(d.startswith("the review of attempt 1 is unverified") for d in decided)


async def test_a_review_the_test_output_bears_out_reaches_the_fixer_as_it_is() -> None:
    outcome, fb, decided = await run((WORSE, GOOD), chat_template=CHATML, check_reviews=True)
    assert outcome.result.passed
    assert "Unverified" not in coder_prompts(fb)[-1]
    assert "multiplies instead of adding" in coder_prompts(fb)[-1]
    assert not any("unverified" in d for d in decided)


TWO = Task(
    meta=TaskMeta(task_id="two", category="bugfix", difficulty=2, description="fix sub"),
    root="",
    problem="`sub(a, b)` should return a minus b; `add` is right.",
    starter=(
        "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a + b\n\n\n"
        "def twice(a):\n    return add(a, a)\n"
    ),
    tests={
        "test_two.py": (
            "from solution import add, sub, twice\n\n\n"
            "def test_all():\n    assert (add(2, 3), sub(5, 3), twice(4)) == (5, 2, 8)\n"
        )
    },
)
SUB_WRONG = "def sub(a, b):\n    return a * b\n```"
SUB_RIGHT = "def sub(a, b):\n    return a - b\n```"


async def test_an_edit_answer_is_spliced_into_the_file_and_graded_whole() -> None:
    outcome, fb, _ = await run(
        (SUB_WRONG, SUB_RIGHT), task=TWO, chat_template=CHATML, edit=True, critic=False
    )
    result = outcome.result
    assert result.passed and result.passed_attempt == 2
    first, fix = coder_prompts(fb)
    assert "Reply with just the functions or classes of solution.py" in first
    assert "Reply with just the corrected functions or classes of solution.py" in fix
    assert "return a * b" in fix  # the fixer's turn shows what it wrote
    capsule = decode_capsule(outcome.capsule_json)
    final = capsule.artifacts[-1].code
    assert "def add(a, b):\n    return a + b" in final and "def twice(a)" in final
    assert "def sub(a, b):\n    return a - b" in final
    assert capsule.artifacts[0].code == TWO.starter.replace(
        "a + b\n\n\ndef twice", "a * b\n\n\ndef twice"
    )


MUL = msgspec.structs.replace(
    TWO,
    meta=msgspec.structs.replace(TWO.meta, task_id="mul", category="feature"),
    problem="Add a function `mul(a, b)` that returns the product of a and b.",
    tests={
        "test_mul.py": (
            "from solution import add, mul, twice\n\n\n"
            "def test_all():\n    assert (add(2, 3), mul(2, 3), twice(4)) == (5, 6, 8)\n"
        )
    },
)


async def test_open_asked_opens_the_first_answer_with_the_definition_the_brief_asks_for() -> None:
    """The coder continues ``def mul``: its answer is the function, spliced into the starter."""
    outcome, fb, _ = await run(
        ("(a, b):\n    return a * b\n```",), task=MUL, chat_template=CHATML, open_asked=True
    )
    assert outcome.result.passed and outcome.result.passed_attempt == 1
    first = coder_prompts(fb)[0]
    assert first.endswith("<|im_start|>assistant\n```python\ndef mul")
    assert "Reply with just the functions or classes of solution.py" in first
    capsule = decode_capsule(outcome.capsule_json)
    final = capsule.artifacts[0].code
    assert final.startswith(TWO.starter.rstrip("\n"))  # the starter, then the new function
    assert final.endswith("def mul(a, b):\n    return a * b\n")
    assert capsule.artifacts[0].answer == "def mul(a, b):\n    return a * b"  # as it wrote it


async def test_the_open_role_writes_the_opened_first_answer() -> None:
    """With ``roles.open`` set, the opened first request goes to that model (here the
    critic's): it is the task's ``code`` model, so the ``coder`` is never asked."""
    outcome, fb, decided = await run(
        (), task=MUL, chat_template=CHATML, open_asked=True, roles={"open": "critic"},
        review="(a, b):\n    return a * b\n```",
    )  # fmt: skip
    assert outcome.result.passed and outcome.result.passed_attempt == 1
    assert [p.model for p in outcome.result.phases if p.phase == "code"] == ["critic"]
    asked = [text for model, text in fb.prompts if model == "critic"]
    assert asked[0].endswith("<|im_start|>assistant\n```python\ndef mul")
    assert not coder_prompts(fb)
    assert "the first answer opens 'def mul': code -> critic (roles.open)" in decided
    assert "code -> critic" in decided


def test_the_open_role_routes_only_a_task_whose_first_request_is_opened() -> None:
    opened = with_roles(profile(open_asked=True), {"open": "critic"})
    assert route(MUL, opened).models["code"] == "critic"
    assert route(MUL, opened).models["fix"] == "coder"  # the fix role is the code role's
    unopened = [
        (MUL, with_roles(profile(open_asked=False), {"open": "critic"})),  # open_asked off
        (MUL, profile(open_asked=True)),  # no open role
        (TWO, opened),  # a bugfix: its brief asks for no new definition
    ]
    for task, prof in unopened:
        assert route(task, prof).models["code"] == "coder", task.task_id


async def test_open_asked_opens_only_the_first_request() -> None:
    wrong, right = "(a, b):\n    return a + b\n```", "def mul(a, b):\n    return a * b\n```"
    outcome, fb, _ = await run(
        (wrong, right), task=MUL, chat_template=CHATML, open_asked=True, critic=False,
        selfcheck=False, draws=0, second_opinion=False,
    )  # fmt: skip
    assert outcome.result.passed and outcome.result.passed_attempt == 2
    fix = coder_prompts(fb)[-1]
    assert fix.endswith("<|im_start|>assistant\n```python\n")  # the fence alone
    assert "```python\ndef mul(a, b):\n    return a + b\n```" in fix  # its own first turn
    final = decode_capsule(outcome.capsule_json).artifacts[-1].code
    assert "def add(a, b)" in final and "def twice(a)" in final  # restored, as the starter has


async def test_without_edit_the_same_answer_is_the_whole_file() -> None:
    outcome, fb, _ = await run(
        (SUB_RIGHT, SUB_RIGHT), task=TWO, chat_template=CHATML, critic=False,
        restore_dropped=False,
    )  # fmt: skip
    assert not outcome.result.passed  # add and twice are gone: the tests cannot import them
    assert "Reply with the complete solution.py" in coder_prompts(fb)[0]


async def test_a_bugfix_answer_gets_back_the_starter_functions_it_left_out() -> None:
    """restore_dropped (rule 3 of swapos.pipeline.restore): a whole-file answer that wrote
    only ``sub`` gets the starter's ``add`` and ``twice`` back, and passes at once."""
    outcome, _, decided = await run((SUB_RIGHT,), task=TWO, chat_template=CHATML, critic=False)
    assert outcome.result.passed and outcome.result.passed_attempt == 1
    assert any(d.startswith("restored what the answer dropped: def add(a, b)") for d in decided)
    final = decode_capsule(outcome.capsule_json).artifacts[-1].code
    assert final.index("def add") < final.index("def sub") < final.index("def twice")


async def test_a_refactor_answer_does_not_get_back_what_it_left_out() -> None:
    refactor = msgspec.structs.replace(
        TWO, meta=msgspec.structs.replace(TWO.meta, task_id="two-r", category="refactor")
    )
    outcome, _, decided = await run(
        (SUB_RIGHT, SUB_RIGHT, SUB_RIGHT), task=refactor, chat_template=CHATML, critic=False
    )
    assert not outcome.result.passed
    assert not any(d.startswith("restored") for d in decided)


async def test_draws_after_an_unchanged_file_are_told_so_and_asked_for_an_edit() -> None:
    unchanged = TWO.starter + "```"
    outcome, fb, decided = await run(
        (unchanged, SUB_RIGHT, SUB_RIGHT), task=TWO, chat_template=CHATML, critic=False,
        draws=2, redraw_unchanged=True,
    )  # fmt: skip
    result = outcome.result
    assert result.passed and result.passed_attempt == 1 and result.grades == 1
    first, draw = coder_prompts(fb)[:2]
    assert draw.startswith(first[: -len("```python\n")])  # the first prompt's conversation
    told = draw[len(first) :]
    assert "the answer is solution.py unchanged, and the task asks for a change" in told
    assert "Reply with just the corrected functions or classes of solution.py" in told
    assert "Reply with just" not in first  # the first prompt asked for the whole file
    assert REDRAWN in decided
    final = decode_capsule(outcome.capsule_json).artifacts[-1].code
    assert "def sub(a, b):\n    return a - b" in final and "def twice(a)" in final


async def test_without_redraw_unchanged_the_draws_come_from_the_same_prompt() -> None:
    unchanged = TWO.starter + "```"
    outcome, fb, decided = await run(
        (unchanged, SUB_RIGHT, SUB_RIGHT), task=TWO, chat_template=CHATML, critic=False,
        draws=2, max_attempts=2, restore_dropped=False,
    )  # fmt: skip
    assert not outcome.result.passed  # the whole file is sub() alone: add cannot be imported
    first, draw = coder_prompts(fb)[:2]
    assert first == draw
    assert REDRAWN not in decided


EXAMPLES_TASK = msgspec.structs.replace(
    FOUR,
    problem=(
        "`add(a, b)` is wrong.\n\nExpected:\n\n- `add(2, 3)` should return `5`\n"
        "- `add(-1, -1)` should return `-2`\n"
    ),
)


async def test_the_draw_that_passes_the_most_examples_goes_back_in_the_candidates_place() -> None:
    # attempt 1 passes 0/2 examples; draw 1 passes 1/2 (BEST), draw 2 0/2; then a right fix
    right = "def add(a, b):\n    return a + b\n```"
    outcome, fb, decided = await run(
        (WORSE, BEST, WORSE2, right), task=EXAMPLES_TASK, chat_template=CHATML, critic=False,
        draws=2, max_attempts=2,
    )  # fmt: skip
    result = outcome.result
    assert result.passed and result.passed_attempt == 2
    assert any("passed 1/2 examples, more than attempt 1's candidate (0/2)" in d for d in decided)
    fix = coder_prompts(fb)[-1]
    assert "return a + b if a >= 0 else 0" in fix and "return a * b" not in fix
    first = decode_capsule(outcome.capsule_json).artifacts[0]
    assert first.attempt == 1 and "a >= 0" in first.code


SCALED = Task(
    meta=TaskMeta(task_id="scaled", category="bugfix", difficulty=2, description="fix scale"),
    root="",
    problem="`scale(x)` should return x times FACTOR.",
    starter="FACTOR = 3\n\n\ndef scale(x):\n    return x + FACTOR\n",
    tests={
        "test_scale.py": "from solution import scale\n\n\ndef test_scale():\n"
        "    assert scale(2) == 6\n"
    },
)
SCALE_DROPPED = "def scale(x):\n    return x * FACTOR\n```"  # the fix, FACTOR left out


async def test_what_an_answer_dropped_and_uses_is_put_back_before_the_grade() -> None:
    outcome, _, decided = await run((SCALE_DROPPED,), task=SCALED, critic=False)
    result = outcome.result
    assert result.passed and result.passed_attempt == 1
    assert "restored what the answer dropped: FACTOR = 3" in decided
    final = decode_capsule(outcome.capsule_json).artifacts[-1].code
    assert final == "FACTOR = 3\n\n\ndef scale(x):\n    return x * FACTOR\n"


async def test_without_restore_dropped_the_answer_is_graded_as_written() -> None:
    outcome, _, decided = await run(
        (SCALE_DROPPED, SCALE_DROPPED), task=SCALED, critic=False, restore_dropped=False
    )
    assert not outcome.result.passed
    assert not any(text.startswith("restored") for text in decided)
    assert "NameError" in decode_capsule(outcome.capsule_json).feedback[0].text


RING = Task(
    meta=TaskMeta(task_id="ring", category="feature", difficulty=2, description="a ring"),
    root="",
    problem="Add a `Ring` class that holds the last `n` items; `Window` keeps working.",
    starter="class Window:\n    pass\n",
    tests={
        "test_ring.py": (
            "from solution import Ring, Window\n\n\n"
            "def test_ring():\n    assert Ring(2).n == 2 and Window()\n"
        )
    },
)
NO_RING = "class Window:\n    size = 1\n```"  # changes the file, adds no Ring
WITH_RING = (
    "class Window:\n    pass\n\n\nclass Ring:\n    def __init__(self, n):\n        self.n = n\n```"
)


async def test_a_candidate_without_the_asked_class_draws_instead_of_spending_a_grade() -> None:
    outcome, _, decided = await run(
        (NO_RING, WITH_RING), task=RING, chat_template=CHATML, critic=False, draws=2,
        side_by_side=False, open_asked=False,
    )  # fmt: skip
    result = outcome.result
    assert result.passed and result.passed_attempt == 1 and result.grades == 1
    lacks = (
        "the candidate does not define `Ring` at module level, which the task asks to add; "
        "the tests import it from solution.py"
    )
    assert decided[decided.index(lacks) + 1].endswith(
        "nothing to check; graded in place of attempt 1's candidate"
    )


async def test_without_precheck_defects_it_is_graded_and_fails() -> None:
    outcome, _, decided = await run(
        (NO_RING, WITH_RING), task=RING, chat_template=CHATML, critic=False, draws=2,
        side_by_side=False, precheck_defects=False, open_asked=False,
    )  # fmt: skip
    result = outcome.result
    assert result.passed and result.passed_attempt == 2 and result.grades == 2
    assert not any("does not define" in d for d in decided)
