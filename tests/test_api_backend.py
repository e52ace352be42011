"""The API backend against a real OpenAI-compatible server on loopback (tests/openai_stub.py),
on asyncio and trio: reachability, streamed chat and text completions, timings, errors named
by URL, cancellation within a piece, and a pipeline task whose roles are remote, graded for
real."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from swapos.actors.system import open_system
from swapos.backends.api import ApiBackend, ApiModel
from swapos.backends.api.backend import estimate_tokens
from swapos.backends.fake import FakeBackend
from swapos.backends.routing import RoutingBackend
from swapos.data.sampling import SamplingParams
from swapos.data.task import Task, TaskMeta
from swapos.errors import GenerationError, ModelFileError
from swapos.models.profile import ModelConfig, PipelineConfig, Profile
from swapos.models.resolve import model_specs
from swapos.models.spec import ModelSpec
from swapos.models.templates import MESSAGES, ChatMessage, encode_messages
from swapos.testing import FakeClock
from tests.fakes import PLAIN
from tests.openai_stub import StubState, free_port, stub_server

pytestmark = pytest.mark.anyio


def remote(base: str, api_model: str = "small", **kw: object) -> ModelSpec:
    cfg = msgspec.structs.replace(ModelConfig(api_base=base, api_model=api_model), **kw)
    return model_specs(Profile(models={"remote": cfg}))["remote"]


def chat(*turns: str) -> str:
    return encode_messages([ChatMessage(role="user", content=t) for t in turns])


async def test_a_remote_model_streams_a_chat_reply_with_its_timings() -> None:
    state = StubState(replies={"small": ["Hello there, friend."]})
    pieces: list[str] = []
    with anyio.fail_after(30):
        async with stub_server(state) as base:
            model = await ApiBackend().load(remote(base))
            try:
                out = await model.generate_text(
                    chat("hi"), SamplingParams(max_tokens=8), chat=True, on_token=pieces.append
                )
            finally:
                await model.close()
    assert out.text == "Hello there, friend."
    assert pieces == ["Hello", " there,", " friend."]
    stats = out.stats
    assert (stats.tokens, stats.stop_reason, stats.kv_restored_tokens) == (3, "stop", 0)
    assert stats.prompt_tokens == stats.prefill_tokens > 0  # the server's usage
    assert stats.ttft_s == stats.prefill_s and stats.gen_s >= 0
    body = state.requests[0]
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert (body["model"], body["max_tokens"], body["stream"]) == ("small", 8, True)


async def test_max_tokens_and_stop_reach_the_server_and_the_cap_is_reported() -> None:
    state = StubState(replies={"small": ["one two three four five six"]})
    with anyio.fail_after(30):
        async with stub_server(state) as base:
            model = await ApiBackend().load(remote(base))
            try:
                capped = await model.generate_text("go", SamplingParams(max_tokens=3), chat=False)
                stopped = await model.generate_text(
                    "go", SamplingParams(max_tokens=9, stop=(" four",)), chat=False
                )
            finally:
                await model.close()
    assert (capped.text, capped.stats.stop_reason, capped.stats.hit_cap) == (
        "one two three",
        "length",
        True,
    )
    assert (stopped.text, stopped.stats.stop_reason) == ("one two three", "stop")
    assert state.requests[0]["prompt"] == "go" and "messages" not in state.requests[0]
    assert state.requests[1]["stop"] == [" four"]


async def test_an_unreachable_endpoint_fails_the_load_naming_the_url() -> None:
    base = f"http://127.0.0.1:{free_port()}/v1"
    with anyio.fail_after(30), pytest.raises(ModelFileError, match=f"{base}/models"):
        await ApiBackend().load(remote(base))


async def test_a_missing_key_variable_fails_the_load_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SWAPOS_TEST_NO_SUCH_KEY", raising=False)
    spec = remote("http://127.0.0.1:1/v1", api_key_env="SWAPOS_TEST_NO_SUCH_KEY")
    with pytest.raises(ModelFileError, match="SWAPOS_TEST_NO_SUCH_KEY"):
        await ApiBackend().load(spec)


async def test_an_error_status_becomes_a_generation_error_quoting_the_server() -> None:
    state = StubState(replies={"small": ["x"]})
    with anyio.fail_after(30):
        async with stub_server(state) as base:
            backend = ApiBackend()
            unknown = await backend.load(remote(base, api_model="nope"))
            try:
                with pytest.raises(GenerationError, match=r"answered 404: model 'nope' not found"):
                    await unknown.generate_text(chat("hi"), SamplingParams(), chat=True)
            finally:
                await unknown.close()
            state.status = 500
            model = await backend.load(remote(base))
            try:
                with pytest.raises(GenerationError, match=f"{base}/chat/completions answered 500"):
                    await model.generate_text(chat("hi"), SamplingParams(), chat=True)
            finally:
                await model.close()


async def test_a_server_that_stops_answering_times_out_with_the_limit_named() -> None:
    state = StubState(replies={"small": ["a b c"]}, hang=True)
    with anyio.fail_after(30):
        async with stub_server(state) as base:
            model = await ApiBackend().load(remote(base, api_timeout_s=0.3))
            try:
                with pytest.raises(GenerationError, match=r"did not answer within api_timeout_s"):
                    await model.generate_text(chat("hi"), SamplingParams(), chat=True)
            finally:
                await model.close()


async def test_cancelling_a_generation_closes_the_stream_after_the_first_piece() -> None:
    state = StubState(replies={"small": ["first second third"]}, hang=True)
    pieces: list[str] = []
    with anyio.fail_after(30):
        async with stub_server(state) as base:
            model = await ApiBackend().load(remote(base))
            try:
                async with anyio.create_task_group() as tg:

                    def on_token(piece: str) -> None:
                        pieces.append(piece)
                        tg.cancel_scope.cancel()

                    tg.start_soon(
                        lambda: model.generate_text(
                            chat("hi"), SamplingParams(), chat=True, on_token=on_token
                        )
                    )
                await state.disconnected.wait()  # the server saw the client go
            finally:
                await model.close()
    assert pieces == ["first"]


async def test_a_chat_prompt_that_is_not_a_conversation_is_refused() -> None:
    state = StubState(replies={"small": ["x"]})
    with anyio.fail_after(30):
        async with stub_server(state) as base:
            model = await ApiBackend().load(remote(base))
            try:
                with pytest.raises(GenerationError, match=r"ChatFormat\.messages"):
                    await model.generate_text("<|im_start|>user", SamplingParams(), chat=True)
                with pytest.raises(GenerationError, match="takes text prompts"):
                    await model.tokenize("hi")
            finally:
                await model.close()
    assert state.requests == []


async def test_the_routing_backend_sends_remote_specs_to_the_api_and_files_to_the_local() -> None:
    clock = FakeClock()
    local = FakeBackend(clock, {})
    routing = RoutingBackend(local)
    spec = remote("http://127.0.0.1:1/v1")
    file_spec = ModelSpec(name="f", path="/nonexistent/f.gguf", footprint_bytes=7)
    assert routing.estimate_footprint(spec) == 0 and routing.estimate_footprint(file_spec) == 7
    assert routing.chat_format(spec) == MESSAGES
    assert routing.token_counter(spec)("abcdefg") == estimate_tokens("abcdefg") == 3
    assert await routing.drop_page_cache(spec) is False
    assert await routing.drop_page_cache(file_spec) is True  # the fake's answer


TASK = Task(
    meta=TaskMeta(task_id="add", category="bugfix", difficulty=2, description="fix add"),
    root="",
    problem="`add(a, b)` should return the sum of a and b.",
    starter="def add(a, b):\n    return a - b\n",
    tests={
        "test_add.py": "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    },
)
BAD = "Here is the fix:\n```python\ndef add(a, b):\n    return a * b\n```\nDone."
GOOD = "```python\ndef add(a, b):\n    return a + b\n```"


async def test_a_task_whose_roles_are_remote_is_conducted_and_graded_for_real() -> None:
    state = StubState(
        replies={
            "planner-m": ["1. Return a plus b."],
            "coder-m": [BAD, GOOD],
        }
    )
    with anyio.fail_after(120):
        async with stub_server(state) as base:
            profile = Profile(
                name="remote",
                budget=1000,  # bytes: only a model with footprint 0 fits
                models={
                    role: ModelConfig(api_base=base, api_model=f"{role}-m", n_ctx=4096)
                    for role in ("planner", "coder")
                },
                roles={"reason": "planner", "code": "coder"},
                pipeline=PipelineConfig(**{**PLAIN, "max_attempts": 2}),
            )
            async with open_system(profile, kv_cache=False) as system:  # the default backend
                result = (await system.run_task(TASK)).result
    assert result.passed and result.error is None and result.iterations == 2
    coder = [r for r in state.requests if r["model"] == "coder-m"]
    assert len(coder) == 2
    first, retry = coder[0]["messages"], coder[1]["messages"]
    assert first[0]["role"] == "system" and first[-1]["role"] == "user"
    assert retry[: len(first)] == first  # append-only conversation
    assert retry[len(first)] == {"role": "assistant", "content": BAD}  # its own words
    assert "test_add" in retry[-1]["content"]  # the failed grade's test output
    assert "stop" not in coder[0]  # no stop at a fence the model opens itself
    phases = [p for p in result.phases if p.phase == "code"]
    assert [p.kv_restored_tokens for p in phases] == [0, 0]
    assert all(p.tokens > 0 and p.prefill_tokens > 0 for p in phases)


async def test_api_model_is_closed_once_and_refuses_generations_after() -> None:
    state = StubState(replies={"small": ["x"]})
    with anyio.fail_after(30):
        async with stub_server(state) as base:
            model: ApiModel = await ApiBackend().load(remote(base))
            await model.close()
            await model.close()
            assert model.closed and model.footprint_bytes == 0
            with pytest.raises(GenerationError, match="is closed"):
                await model.generate_text(chat("hi"), SamplingParams(), chat=True)
