"""The retry policy's best-candidate rule, draws, opened first answers, restored bindings and
pre-grade defects, conducted end to end: fake models, the real sandboxed grader."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from swapos.backends.fake_script import FakeModelScript
from swapos.capsule.schema import decode_capsule
from swapos.data.task import Task, TaskMeta
from swapos.messages.events import RouterDecided
from swapos.models.profile import ModelConfig, PipelineConfig, Profile
from swapos.passes import passes_named
from swapos.pipeline.routing import RoutePlan, route
from swapos.testing import FakeClock
from tests.fakes import fake_system
from tests.test_conductor import CHATML, TASK, profile, scripts

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
    opener: str | None = None,
    roles: dict[str, str] | None = None,
    prefill_s: float = 0.0,
    **pipeline: Any,
):
    """Run ``task``; with ``opener``, a third model ``opener`` that answers that; the coder
    prefills a prompt token in ``prefill_s``."""
    models = scripts(replies, chat_template)
    models["coder"] = msgspec.structs.replace(models["coder"], prefill_s_per_token=prefill_s)
    if chat_template is not None:
        models["planner"] = msgspec.structs.replace(models["planner"], chat_template=chat_template)
    prof = with_roles(profile(max_attempts, **pipeline), roles or {})
    if opener is not None:
        models["opener"] = FakeModelScript(
            load_s=1.0, token_s=0.05, reply=opener, chat_template=chat_template
        )
        config = ModelConfig(path="/nonexistent/opener.gguf", n_ctx=4096)
        prof = msgspec.structs.replace(prof, models={**prof.models, "opener": config})
    decided: list[str] = []

    def on_event(event: object) -> None:
        if isinstance(event, RouterDecided):
            decided.append(event.text)

    clock = FakeClock()
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            fake_system(
                models, budget=300, clock=clock, profile=prof, on_event=on_event,
            ) as (sys, fb),
        ):  # fmt: skip
            outcome = await sys.run_task(task)
    return outcome, fb, decided


def without(*names: str) -> list[str]:
    """The default profile's passes but ``names``."""
    return [p for p in PipelineConfig().passes if p not in names]


def routed(task: Task, prof: Profile) -> RoutePlan:
    """``task`` routed for ``prof``, with the passes it names."""
    return route(task, prof, passes_named(prof.pipeline.passes))


def with_roles(prof: Profile, roles: dict[str, str]) -> Profile:
    return msgspec.structs.replace(prof, roles={**prof.roles, **roles})


def coder_prompts(fb: Any) -> list[str]:
    return [text for model, text in fb.prompts if model == "coder"]


async def test_the_fixer_starts_from_the_best_candidate_and_the_task_ends_on_it() -> None:
    outcome, fb, decided = await run((BEST, WORSE, WORSE2), task=FOUR)
    result = outcome.result
    assert not result.passed and result.grades == 3
    # The result is attempt 1's (3/4), not the newest's (1/4).
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
    outcome, fb, _ = await run(("(a, b):\n    return a * b\n```",), task=MUL, chat_template=CHATML)
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
    """With ``roles.open`` set, the opened first request goes to that model: it is the
    task's ``code`` model, so the ``coder`` is never asked."""
    outcome, fb, decided = await run(
        (), task=MUL, chat_template=CHATML, roles={"open": "opener"},
        opener="(a, b):\n    return a * b\n```",
    )  # fmt: skip
    assert outcome.result.passed and outcome.result.passed_attempt == 1
    assert [p.model for p in outcome.result.phases if p.phase == "code"] == ["opener"]
    asked = [text for model, text in fb.prompts if model == "opener"]
    assert asked[0].endswith("<|im_start|>assistant\n```python\ndef mul")
    assert not coder_prompts(fb)
    assert "the first answer opens 'def mul': code -> opener (roles.open)" in decided
    assert "code -> opener" in decided


def test_the_open_role_routes_only_a_task_whose_first_request_is_opened() -> None:
    opened = with_roles(profile(), {"open": "opener"})
    assert routed(MUL, opened).models["code"] == "opener"
    assert routed(MUL, opened).models["fix"] == "coder"  # the fix role is the code role's
    unopened = [
        (MUL, with_roles(profile(passes=without("open_asked")), {"open": "opener"})),
        (MUL, profile()),  # no open role
        (TWO, opened),  # a bugfix: its brief asks for no new definition
    ]
    for task, prof in unopened:
        assert routed(task, prof).models["code"] == "coder", task.task_id


async def test_open_asked_opens_only_the_first_request() -> None:
    wrong, right = "(a, b):\n    return a + b\n```", "def mul(a, b):\n    return a * b\n```"
    outcome, fb, _ = await run(
        (wrong, right), task=MUL, chat_template=CHATML,
        selfcheck=False, draws=0, second_opinion=False,
    )  # fmt: skip
    assert outcome.result.passed and outcome.result.passed_attempt == 2
    fix = coder_prompts(fb)[-1]
    assert fix.endswith("<|im_start|>assistant\n```python\n")  # the fence alone
    assert "```python\ndef mul(a, b):\n    return a + b\n```" in fix  # its own first turn
    final = decode_capsule(outcome.capsule_json).artifacts[-1].code
    assert "def add(a, b)" in final and "def twice(a)" in final  # restored, as the starter has


async def test_without_restore_dropped_a_one_function_answer_is_the_whole_file() -> None:
    outcome, fb, _ = await run(
        (SUB_RIGHT, SUB_RIGHT), task=TWO, chat_template=CHATML,
        passes=without("restore_dropped"),
    )  # fmt: skip
    assert not outcome.result.passed  # add and twice are gone: the tests cannot import them
    assert "Reply with the complete solution.py" in coder_prompts(fb)[0]


async def test_a_bugfix_answer_gets_back_the_starter_functions_it_left_out() -> None:
    """restore_dropped (swapos.passes.restore): a whole-file answer that wrote
    only ``sub`` gets the starter's ``add`` and ``twice`` back, and passes at once."""
    outcome, _, decided = await run((SUB_RIGHT,), task=TWO, chat_template=CHATML)
    assert outcome.result.passed and outcome.result.passed_attempt == 1
    assert any(d.startswith("restored what the answer dropped: def add(a, b)") for d in decided)
    final = decode_capsule(outcome.capsule_json).artifacts[-1].code
    assert final.index("def add") < final.index("def sub") < final.index("def twice")


async def test_a_refactor_answer_does_not_get_back_what_it_left_out() -> None:
    refactor = msgspec.structs.replace(
        TWO, meta=msgspec.structs.replace(TWO.meta, task_id="two-r", category="refactor")
    )
    outcome, _, decided = await run(
        (SUB_RIGHT, SUB_RIGHT, SUB_RIGHT), task=refactor, chat_template=CHATML
    )
    assert not outcome.result.passed
    assert not any(d.startswith("restored") for d in decided)


async def test_the_draws_after_an_unchanged_file_come_from_the_same_prompt() -> None:
    unchanged = TWO.starter + "```"
    outcome, fb, decided = await run(
        (unchanged, SUB_RIGHT, SUB_RIGHT), task=TWO, chat_template=CHATML,
        draws=2, max_attempts=2, passes=without("restore_dropped"),
    )  # fmt: skip
    assert not outcome.result.passed  # the whole file is sub() alone: add cannot be imported
    first, draw = coder_prompts(fb)[:2]
    assert first == draw
    assert "the answer is solution.py unchanged, and the task asks for a change" in decided


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
        (WORSE, BEST, WORSE2, right), task=EXAMPLES_TASK, chat_template=CHATML,
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
    outcome, _, decided = await run((SCALE_DROPPED,), task=SCALED)
    result = outcome.result
    assert result.passed and result.passed_attempt == 1
    assert "restored what the answer dropped: FACTOR = 3" in decided
    final = decode_capsule(outcome.capsule_json).artifacts[-1].code
    assert final == "FACTOR = 3\n\n\ndef scale(x):\n    return x * FACTOR\n"


async def test_without_restore_dropped_the_answer_is_graded_as_written() -> None:
    outcome, _, decided = await run(
        (SCALE_DROPPED, SCALE_DROPPED), task=SCALED, passes=without("restore_dropped")
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
        (NO_RING, WITH_RING), task=RING, chat_template=CHATML, draws=2,
        side_by_side=False, passes=without("open_asked"),
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
        (NO_RING, WITH_RING), task=RING, chat_template=CHATML, draws=2,
        side_by_side=False, passes=without("precheck_defects", "open_asked"),
    )  # fmt: skip
    result = outcome.result
    assert result.passed and result.passed_attempt == 2 and result.grades == 2
    assert not any("does not define" in d for d in decided)


LOUD = msgspec.structs.replace(
    FOUR,
    tests={
        "test_add.py": "from solution import add\n\n\ndef test_add():\n"
        "    assert add(2, 3) == 5, 'the sum of two and three ' * 60\n"
    },
)
"""A task whose failed test prints a long message: a fix's prompt carries it."""


async def limited(**pipeline: Any) -> tuple[int, bool, int, list[str]]:
    """Run LOUD (a failing answer, then one that passes) under ``pipeline``'s settings: its
    attempts, whether it passed, the coder's prompts and the capsule's decisions."""
    outcome, fb, _ = await run((WORSE, BEST), task=LOUD, **pipeline)
    texts = [d.text for d in decode_capsule(outcome.capsule_json).decisions]
    return outcome.result.iterations, outcome.result.passed, len(coder_prompts(fb)), texts


def stopped_after_1(expected: float, spent: float, limit: float) -> str:
    return (
        f"attempt 1 was the last the task could afford: another is expected to take "
        f"{expected:.1f} s more, and {spent:.1f} s of its {limit:.1f} s is spent"
    )


@pytest.mark.parametrize(("seconds", "attempts"), [(2.8, 1), (4.0, 2)])
async def test_a_fix_whose_prompt_costs_too_much_to_read_is_not_asked(
    seconds: float, attempts: int
) -> None:
    # At 2.8 s the task affords another answer like its first (the rule before pricing
    # asked the fix, and it passed), but not that answer and the fix's long prompt at 2 ms
    # a token; at 4 s it affords both. The answers' cost alone is counted (the fake models'
    # loads put the wall past 2.8 s).
    ran = await limited(task_seconds=seconds, prefill_s=0.002, count_wall=False)
    assert ran[:3] == (attempts, attempts == 2, attempts)
    assert (stopped_after_1(2.1, 1.2, 2.8) in ran[3]) == (attempts == 1)


@pytest.mark.parametrize(("count_wall", "attempts"), [(False, 2), (True, 1)])
async def test_the_spend_limit_counts_the_task_wall(count_wall: bool, attempts: int) -> None:
    # The answers' cost leaves the 2.8 s limit room for another answer like them (0.5 s);
    # the task's wall (the fake models' loads too, on the fake clock) does not.
    ran = await limited(task_seconds=2.8, price_attempts=False, count_wall=count_wall)
    assert ran[:3] == (attempts, attempts == 2, attempts)
    assert (stopped_after_1(0.5, 2.5, 2.8) in ran[3]) == count_wall
