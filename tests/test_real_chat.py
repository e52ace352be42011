"""The real Qwen2.5-Coder 0.5B Instruct through its chat template (short generations)."""

from __future__ import annotations

import anyio
import pytest

from swapos.actors.system import open_system
from swapos.backends.llama import LlamaBackend
from swapos.data.sampling import SamplingParams
from swapos.data.task import Task, TaskMeta
from swapos.models.bundled import bundled_model_path
from swapos.models.profile import ModelConfig, PhaseConfig, PipelineConfig, Profile
from swapos.models.spec import ModelSpec
from swapos.models.templates import ChatMessage, render_chat
from tests.fakes import PLAIN

pytestmark = [pytest.mark.anyio, pytest.mark.real_model]

SMALL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
CHAT = [
    ChatMessage(role="system", content="You are an expert Python programmer."),
    ChatMessage(
        role="user",
        content="Write a Python function `square(x)` that returns x squared. "
        "Reply with one ```python code block.",
    ),
]
EXPECTED = "```python\ndef square(x):\n    return x * x\n```"


async def test_greedy_answer_of_the_real_05b_to_a_fixed_chat_is_fixed() -> None:
    spec = ModelSpec(name="small", path=str(bundled_model_path(SMALL)), n_ctx=1024)
    backend = LlamaBackend()
    fmt = await anyio.to_thread.run_sync(backend.chat_format, spec)
    assert fmt is not None
    model = await backend.load(spec)
    try:
        prompt = await model.tokenize(render_chat(fmt, CHAT), special=True)
        assert prompt.count(151644) == 3  # <|im_start|> is one special token, not text
        out = await model.generate(prompt, SamplingParams(max_tokens=40))
    finally:
        await model.close()
    assert out.text == EXPECTED


TASK = Task(
    meta=TaskMeta(task_id="HumanEval_square", category="completion"),
    root="",
    problem="Complete the function.",
    starter=(
        'def square(x: int) -> int:\n    """Return x squared.\n    >>> square(3)\n    9\n    """\n'
    ),
    tests={
        "test_square.py": "from solution import square\n\n\n"
        "def test_square():\n    assert square(-4) == 16\n"
    },
    entry_point="square",
)


async def test_the_instruct_pipeline_solves_a_completion_task_on_the_first_attempt() -> None:
    profile = Profile(
        name="small only",
        budget="1GiB",
        models={"small": ModelConfig(bundled=SMALL, n_ctx=1024)},
        roles={"code": "small"},
        phases={"code": PhaseConfig(max_tokens=48, prompt_budget_tokens=800)},
        pipeline=PipelineConfig(**{**PLAIN, "max_attempts": 2}),
    )
    with anyio.fail_after(120):
        async with open_system(profile) as system:
            outcome = await system.run_task(TASK)
    result = outcome.result
    assert result.passed and result.pass_at_1 and result.passed_attempt == 1
    assert [p.phase for p in result.phases] == ["code", "selfcheck", "grade"]
    code = result.phases[0]
    assert code.tokens < 48 and not code.hit_cap  # the body only: the prompt opened the function
