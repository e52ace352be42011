"""Remote models in profiles (``api_base``/``api_model``/``api_key_env``) and the message
format the pipeline renders for them; no server needed."""

from __future__ import annotations

import pytest

from swapos.data.task import Task, TaskMeta
from swapos.errors import ProfileError
from swapos.models.profile import decode_profile
from swapos.models.resolve import checked_model_specs
from swapos.models.templates import (
    MESSAGES,
    ChatMessage,
    TemplateError,
    decode_messages,
    encode_messages,
    render_chat,
)
from swapos.pipeline.chat_prompts import build_chat_prompt
from swapos.pipeline.prompts import capsule_for_task

REMOTE = """
[models.local]
path = "/models/local.gguf"
[models.remote]
api_base = "http://127.0.0.1:8080/v1/"
api_model = "small"
api_key_env = "OPENAI_API_KEY"
n_ctx = 8192
[roles]
code = "remote"
"""


def test_a_remote_model_resolves_to_a_spec_with_its_endpoint_and_no_footprint() -> None:
    specs = checked_model_specs(
        decode_profile(REMOTE.replace('[models.local]\npath = "/models/local.gguf"\n', ""))
    )
    spec = specs["remote"]
    assert spec.remote and spec.api is not None
    assert (spec.api.base, spec.api.model, spec.api.key_env) == (
        "http://127.0.0.1:8080/v1",
        "small",
        "OPENAI_API_KEY",
    )
    assert (spec.path, spec.n_ctx, spec.footprint_bytes) == ("http://127.0.0.1:8080/v1", 8192, 0)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('api_model = "small"\n', ""), "needs `api_model`"),
        (("http://127.0.0.1:8080/v1/", "127.0.0.1:8080"), "is not an http\\(s\\) URL"),
        (('"OPENAI_API_KEY"', '"sk-abc123-secret"'), "never the key itself"),
        (('api_model = "small"', 'api_model = "small"\npath = "/x.gguf"'), "exactly one of"),
        (('api_model = "small"', 'api_model = "small"\napi_timeout_s = 0'), "api_timeout_s"),
        (('api_model = "small"', 'api_model = "small"\napi_key = "x"'), "api_key"),
    ],
)
def test_a_bad_remote_model_is_an_error_naming_the_field(
    edit: tuple[str, str], message: str
) -> None:
    with pytest.raises(ProfileError, match=message):
        decode_profile(REMOTE.replace(*edit))


def test_api_fields_without_api_base_are_an_error() -> None:
    text = '[models.m]\npath = "/m.gguf"\napi_model = "small"\n'
    with pytest.raises(ProfileError, match="need `api_base`"):
        decode_profile(text)


def test_messages_round_trip_and_a_non_conversation_is_refused() -> None:
    messages = [
        ChatMessage(role="system", content="be brief"),
        ChatMessage(role="user", content='é\n"x"'),
    ]
    assert render_chat(MESSAGES, messages) == encode_messages(messages)
    assert decode_messages(encode_messages(messages)) == messages
    with pytest.raises(TemplateError, match="not a JSON list of chat messages"):
        decode_messages("<|im_start|>user")


TASK = Task(
    meta=TaskMeta(task_id="f", category="completion", difficulty=1, description="f"),
    root="",
    problem="",
    starter='def f(x):\n    """Double x."""\n',
    tests={},
    entry_point="f",
)


def test_a_remote_chat_prompt_opens_nothing_of_the_answer() -> None:
    prompt = build_chat_prompt("code", TASK, capsule_for_task(TASK), len, 2000, MESSAGES)
    messages = decode_messages(prompt.text)
    assert [m.role for m in messages] == ["system", "user"]
    assert (prompt.stable, prompt.answer_prefix, prompt.opening, prompt.stop) == ("", "", "", ())
    assert prompt.chat and "def f(x)" in messages[1].content
