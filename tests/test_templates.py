"""Chat templates: ours renders what the reference implementations render."""

from __future__ import annotations

import ctypes

import llama_cpp
import msgspec
import pytest
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from swapos.backends.llama import LlamaBackend
from swapos.models.bundled import CHUNKED, bundled_model_path
from swapos.models.spec import ModelSpec
from swapos.models.templates import (
    CHATML,
    ChatFormat,
    ChatMessage,
    TemplateError,
    render_chat,
)

CONVERSATION = [
    ChatMessage(role="system", content="You are an expert Python programmer."),
    ChatMessage(role="user", content="Fix it:\n```python\ndef f(x):\n    return x - 1\n```"),
    ChatMessage(role="assistant", content="```python\ndef f(x):\n    return x + 1\n```"),
    ChatMessage(role="user", content="Test output:\nE  assert 3 == 2\n\nTry again, ünïcode."),
]


def _qwen_format(name: str) -> ChatFormat:
    spec = ModelSpec(name=name, path=str(bundled_model_path(name)))
    fmt = LlamaBackend().chat_format(spec)
    assert fmt is not None, f"{name} has no chat template"
    return fmt


def _llama_cpp_c(template: str, messages: list[ChatMessage]) -> str:
    """llama.cpp's own ``llama_chat_apply_template`` (C, no Jinja)."""
    encoded = [(m.role.encode(), m.content.encode()) for m in messages]
    chat = (llama_cpp.llama_chat_message * len(encoded))()
    for i, (role, content) in enumerate(encoded):
        chat[i].role, chat[i].content = role, content
    buf = ctypes.create_string_buffer(1 << 16)
    n = llama_cpp.llama_chat_apply_template(template.encode(), chat, len(chat), True, buf, 1 << 16)
    assert 0 < n < 1 << 16
    return buf.raw[:n].decode()


@pytest.mark.real_model
@pytest.mark.parametrize("name", sorted(CHUNKED))
def test_qwen_template_renders_like_llama_cpp_python_and_llama_cpp(name: str) -> None:
    fmt = _qwen_format(name)
    ours = render_chat(fmt, CONVERSATION)
    reference = Jinja2ChatFormatter(
        template=fmt.template, eos_token=fmt.eos_token, bos_token=fmt.bos_token
    )(messages=[{"role": m.role, "content": m.content} for m in CONVERSATION]).prompt
    assert ours == reference
    assert ours == _llama_cpp_c(fmt.template, CONVERSATION)
    assert ours.endswith("<|im_start|>assistant\n")
    assert (fmt.bos_token, fmt.eos_token, fmt.adds_bos) == ("<|endoftext|>", "<|im_end|>", False)


@pytest.mark.real_model
@pytest.mark.parametrize("name", sorted(CHUNKED))
def test_qwen_template_adds_its_default_system_message(name: str) -> None:
    text = render_chat(_qwen_format(name), CONVERSATION[1:2])
    assert text.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.")


def test_chatml_fallback_renders_turns_and_the_generation_prompt() -> None:
    text = render_chat(ChatFormat(template=CHATML), CONVERSATION[:2])
    assert text == (
        "<|im_start|>system\nYou are an expert Python programmer.<|im_end|>\n"
        f"<|im_start|>user\n{CONVERSATION[1].content}<|im_end|>\n<|im_start|>assistant\n"
    )
    closed = render_chat(ChatFormat(template=CHATML), CONVERSATION[:2], add_generation_prompt=False)
    assert closed.endswith("<|im_end|>\n")


def test_a_bos_the_tokenizer_adds_itself_is_not_written_twice() -> None:
    fmt = ChatFormat(
        template="{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}",
        bos_token="<bos>",
        adds_bos=True,
    )
    assert render_chat(fmt, CONVERSATION[1:2]) == CONVERSATION[1].content
    kept = msgspec.structs.replace(fmt, adds_bos=False)
    assert render_chat(kept, CONVERSATION[1:2]).startswith("<bos>")


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",  # sandbox escape attempt
        "{% for m in messages %}",  # does not compile
        "{{ raise_exception('roles must alternate') }}",
    ],
)
def test_a_bad_or_hostile_template_is_a_template_error(template: str) -> None:
    with pytest.raises(TemplateError):
        render_chat(ChatFormat(template=template), CONVERSATION)
