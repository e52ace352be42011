"""The passes: the core runs a task with none of them, end to end on the fake backend; with
the default set the same task reads its brief's example, opens its first answer with the
definition the brief asks for, splices it into the starter and passes."""

from __future__ import annotations

from typing import get_args

import msgspec
import pytest

from swapos.capsule.schema import decode_capsule
from swapos.models.profile import PassName, PipelineConfig
from swapos.passes import PASSES, passes_named
from swapos.pipeline.hooks import NO_PASSES
from tests.test_conductor import CHATML
from tests.test_conductor_rules import MUL, coder_prompts, run

pytestmark = pytest.mark.anyio

EXAMPLED = msgspec.structs.replace(
    MUL, problem=MUL.problem + "\n\nExample: `mul(2, 3)` should return `6`.\n"
)
MUL_ONLY = "def mul(a, b):\n    return a * b\n```"  # the function alone, the rest dropped
OPENED = "(a, b):\n    return a * b\n```"  # the same, continuing an opened `def mul`


async def test_the_core_runs_a_task_with_no_pass() -> None:
    outcome, fb, decided = await run(
        (MUL_ONLY,), task=EXAMPLED, chat_template=CHATML, passes=[], max_attempts=1
    )
    result = outcome.result
    assert [p.phase for p in result.phases] == ["reason", "code", "grade"]  # no self-check
    assert not result.passed  # add and twice are gone: nothing puts them back
    (first,) = coder_prompts(fb)
    assert first.endswith("<|im_start|>assistant\n```python\n")  # no opening
    assert "Reply with the complete solution.py" in first
    assert not [d for d in decided if d.startswith(("self-check", "restored", "the first"))]
    assert decode_capsule(outcome.capsule_json).artifacts[0].code == MUL_ONLY.removesuffix("```")


async def test_the_default_passes_read_the_brief_and_repair_the_answer() -> None:
    outcome, fb, decided = await run((OPENED,), task=EXAMPLED, chat_template=CHATML, max_attempts=2)
    result = outcome.result
    assert [p.phase for p in result.phases] == ["reason", "code", "selfcheck", "grade"]
    assert result.passed and result.pass_at_1
    assert coder_prompts(fb)[0].endswith("<|im_start|>assistant\n```python\ndef mul")
    assert "self-check: 1 brief examples run before grading" in decided


def test_every_pass_a_profile_may_name_is_registered_and_the_default_names_them_all() -> None:
    assert tuple(PASSES) == get_args(PassName)
    assert PipelineConfig().passes == list(PASSES)
    assert passes_named([]) == NO_PASSES


def test_the_passes_apply_in_the_registrys_order_whatever_the_profiles() -> None:
    names = passes_named(["restore_dropped", "open_asked"])
    assert names.names == ("open_asked", "restore_dropped")
    assert len(names.repairs) == 2 and not names.checks
    assert passes_named(["precheck_defects"]).checks and not passes_named(["examples"]).checks
