"""The pipeline conducted by the Router: fake models, the real sandboxed grader."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from swapos.backends.fake import FakeModelScript
from swapos.capsule.schema import decode_capsule
from swapos.models.profile import ModelConfig, PipelineConfig, Profile
from swapos.pipeline.task import Task, TaskMeta
from swapos.testing import FakeClock
from tests.fakes import fake_system

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


def scripts(code_reply: str) -> dict[str, FakeModelScript]:
    return {
        "planner": FakeModelScript(load_s=1.0, token_s=0.05, reply="Return a plus b.\n\n"),
        "coder": FakeModelScript(load_s=1.0, token_s=0.05, reply=code_reply),
        "critic": FakeModelScript(
            load_s=1.0, token_s=0.05, reply="it multiplies instead of adding.\n\n"
        ),
    }


def profile(max_attempts: int = 2) -> Profile:
    names = ["planner", "coder", "critic"]
    return Profile(
        name="fake",
        budget=1000,
        models={n: ModelConfig(path=f"/nonexistent/{n}.gguf", n_ctx=4096) for n in names},
        roles={"reason": "planner", "code": "coder", "critic": "critic"},
        pipeline=PipelineConfig(max_attempts=max_attempts),
    )


async def run(code_reply: str, max_attempts: int = 2):  # type: ignore[no-untyped-def]
    clock = FakeClock()
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            fake_system(
                scripts(code_reply), budget=300, clock=clock, profile=profile(max_attempts)
            ) as (sys, fb),
        ):
            outcome = await sys.run_task(TASK)
    return outcome, fb


async def test_task_passing_on_first_attempt_ends_after_one_grade() -> None:
    outcome, _ = await run(GOOD)
    result = outcome.result
    assert result.passed and result.pass_at_1 and result.iterations == 1
    assert [p.phase for p in result.phases] == ["reason", "code", "grade"]
    assert (result.tests_passed, result.tests_total) == (1, 1)


async def test_failing_attempt_goes_through_critic_and_retries_with_feedback() -> None:
    outcome, fb = await run(BAD, max_attempts=2)
    result = outcome.result
    assert not result.passed and result.iterations == 2
    assert [p.phase for p in result.phases] == [
        "reason",
        "code",
        "grade",
        "critic",
        "code",
        "grade",
    ]
    second_code_prompt = [text for model, text in fb.prompts if model == "coder"][1]
    assert "multiplies instead of adding" in second_code_prompt
    assert "return a * b" in second_code_prompt
    capsule = decode_capsule(outcome.capsule_json)
    assert [f.source for f in capsule.feedback] == ["grader", "critic", "grader"]
    assert len(capsule.artifacts) == 2


async def test_stable_prefix_is_shared_by_retries() -> None:
    _, fb = await run(BAD, max_attempts=2)
    first, second = [text for model, text in fb.prompts if model == "coder"]
    stable = first[: first.index("## solution.py")]
    assert second.startswith(stable) and "## Task" in stable


async def test_model_that_emits_nothing_ends_the_task_with_a_reason() -> None:
    outcome, _ = await run("", max_attempts=1)
    assert not outcome.result.passed
    assert outcome.result.error is None or "no code" in (outcome.result.error or "")
    capsule = decode_capsule(outcome.capsule_json)
    assert "no code" in capsule.feedback[-1].text
    assert msgspec.json.decode(outcome.capsule_json)["version"] == 1
