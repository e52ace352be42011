"""A pipeline whose roles are remote models on ``swapos serve`` (loopback HTTP) reads the same
prompts, writes the same answers and keeps the same records as the same pipeline in process
(timings aside), on asyncio and trio: the API backend sends the answer's opening as a final
assistant message (``continue_final_message``) and the server continues it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import anyio
import pytest

from swapos.actors.system import System, open_system
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.clock import MonotonicClock
from swapos.data.task import Task
from swapos.models.profile import ModelConfig, PipelineConfig, Profile
from swapos.models.spec import ModelSpec
from swapos.models.templates import CHATML
from swapos.records.schema import TaskResult
from swapos.serve import app
from swapos.serve.hosting import listening_socket, serve_http
from swapos.testing import FakeClock
from tests.fakes import ADD_TASK, DOCTEST_TASK, PLAIN
from tests.serve_fakes import in_process as served_in_process

pytestmark = pytest.mark.anyio

ROLES = {"reason": "planner", "code": "coder"}
WRONG = "def add(a, b):\n    return a * b\n```\nThat multiplies."
RIGHT = "def add(a, b):\n    return a + b\n```"


def scripts() -> dict[str, FakeModelScript]:
    """Instruct models (ChatML) on the real clock; the coder is wrong, then right."""
    instruct = partial(FakeModelScript, load_s=0.01, token_s=0.0005, chat_template=CHATML)
    return {
        "planner": instruct(reply="Return the sum.\n\nDone."),
        "coder": instruct(replies=(WRONG, RIGHT)),
    }


def local_profile() -> Profile:
    models = {n: ModelConfig(path=f"/nonexistent/{n}.gguf", n_ctx=4096) for n in ROLES.values()}
    return Profile(
        name="local", budget=1000, models=models, roles=ROLES,
        pipeline=PipelineConfig(**{**PLAIN, "max_attempts": 3}),
    )  # fmt: skip


def remote_profile(base: str) -> Profile:
    models = {
        n: ModelConfig(api_base=base, api_model=n, n_ctx=4096, api_continue=True)
        for n in ROLES.values()
    }
    return Profile(
        name="remote", budget=1000, models=models, roles=ROLES,
        pipeline=PipelineConfig(**{**PLAIN, "max_attempts": 3}),
    )  # fmt: skip


@asynccontextmanager
async def local_system(backend: FakeBackend) -> AsyncIterator[System]:
    specs = {
        n: ModelSpec(name=n, path=f"/nonexistent/{n}.gguf", n_ctx=4096) for n in ROLES.values()
    }
    async with open_system(local_profile(), backend=backend, specs=specs) as system:
        yield system


async def in_process(task: Task) -> tuple[TaskResult, list[tuple[str, str]]]:
    backend = FakeBackend(MonotonicClock(), scripts())
    async with local_system(backend) as system:
        result = (await system.run_task(task)).result
    return result, backend.prompts


async def through_serve(task: Task) -> tuple[TaskResult, list[tuple[str, str]]]:
    """The same task, its models behind ``swapos serve`` on a free loopback port."""
    backend = FakeBackend(MonotonicClock(), scripts())
    async with local_system(backend) as served:
        bind, port = listening_socket()
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            serving = partial(serve_http, app(served), bind=bind, shutdown_trigger=stop.wait)
            tg.start_soon(serving)
            profile = remote_profile(f"http://127.0.0.1:{port}/v1")
            async with open_system(profile, kv_cache=False) as client:
                result = (await client.run_task(task)).result
            stop.set()
    return result, backend.prompts


def same(result: TaskResult) -> tuple[object, ...]:
    """A result without its timings, ids and cache figures."""
    phases = [
        (p.phase, p.model, p.attempt, p.prompt_tokens, p.tokens, p.hit_cap, p.outcome, p.error)
        for p in result.phases
    ]
    return (
        result.task_id, result.passed, result.pass_at_1, result.iterations,
        result.tests_passed, result.tests_total, result.error, result.passed_attempt,
        result.grades, phases,
    )  # fmt: skip


@pytest.mark.parametrize("task", [ADD_TASK, DOCTEST_TASK], ids=["bugfix", "completion"])
async def test_a_pipeline_through_swapos_serve_keeps_the_in_process_records(task: Task) -> None:
    with anyio.fail_after(120):
        local, local_prompts = await in_process(task)
        remote, served_prompts = await through_serve(task)
    assert local.passed and local.iterations >= 2  # a retry, with the test output in it
    assert served_prompts == local_prompts  # every model read exactly the same text
    assert same(remote) == same(local)


async def test_the_server_continues_a_final_assistant_message_and_refuses_misuse() -> None:
    """``continue_final_message``: the prompt ends with the opened answer (no end of turn);
    asked wrongly, a 400 naming the field, and the server serves on."""
    clock = FakeClock()
    scripts = {
        "a": FakeModelScript(reply="return 1", load_s=0.0, token_s=0.1, chat_template=CHATML)
    }
    turns = [{"role": "user", "content": "Write f."}, {"role": "assistant", "content": "def f():"}]
    with anyio.fail_after(30):
        async with clock.autojump(), served_in_process(scripts, budget=100, clock=clock) as s:
            ok = await s.client.post(
                "/v1/chat/completions",
                json={"model": "a", "messages": turns, "continue_final_message": True,
                      "add_generation_prompt": False},
            )  # fmt: skip
            last_user = await s.client.post(
                "/v1/chat/completions",
                json={"model": "a", "messages": turns[:1], "continue_final_message": True,
                      "add_generation_prompt": False},
            )  # fmt: skip
            half = await s.client.post(
                "/v1/chat/completions",
                json={"model": "a", "messages": turns, "continue_final_message": True},
            )
            alone = await s.client.post(
                "/v1/chat/completions",
                json={"model": "a", "messages": turns, "add_generation_prompt": False},
            )
    assert ok.status_code == 200
    assert ok.json()["choices"][0]["message"]["content"] == "return 1"
    assert s.backend.prompts[-1][1].endswith("<|im_start|>assistant\ndef f():")
    assert [r.status_code for r in (last_user, half, alone)] == [400, 400, 400]
    assert last_user.json()["error"]["param"] == "messages"
    assert {half.json()["error"]["param"], alone.json()["error"]["param"]} == {
        "add_generation_prompt"
    }
    assert len(s.backend.prompts) == 1  # the refused requests never reached a model
