"""Chat templates: how an instruct model wants a conversation written.

An instruct GGUF carries its chat template (``tokenizer.chat_template``, Jinja2) in its
metadata. :func:`render_chat` runs that template in a sandboxed Jinja2 environment configured
as Hugging Face Transformers and llama-cpp-python configure theirs (``trim_blocks``,
``lstrip_blocks``, ``loopcontrols``, ``raise_exception``, a ``tojson`` that keeps non-ASCII),
so a prompt is exactly what the model was trained on.

Why Jinja2 and not llama.cpp's ``llama_chat_apply_template``: the C function does not run the
template; it guesses a known format from substrings of it and writes that format itself, so a
template it does not recognise fails and one it half-recognises is rendered its own way
(Qwen2.5's default system message, for one, is left out). Jinja2 runs the model's own text.
The sandbox keeps a hostile template from reaching Python internals.

This module is on the bottom floor: it imports only the standard library, msgspec and jinja2.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from typing import Any, Final, Literal

import jinja2
import jinja2.ext
import msgspec
from jinja2.sandbox import ImmutableSandboxedEnvironment

from swapos.errors import TemplateError as TemplateError  # noqa: PLC0414 (re-exported)

Role = Literal["system", "user", "assistant", "tool"]

CHATML: Final = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""The template used when a profile forces ``prompt = "chat"`` on a model without one."""


class TemplateToolCall(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A tool call an assistant turn made, as chat templates read it: ``arguments`` is the
    decoded object (Hugging Face's convention; a template writes it with ``tojson``), or
    the text as sent where it is not JSON."""

    name: str
    arguments: Any
    id: str = ""


class ChatMessage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One turn of a conversation.

    Attributes:
        role: who speaks; ``tool`` is a tool's result, answering a call of the turn before.
        content: the text.
        tool_calls: the calls an assistant turn made (its content may then be empty).
        tool_call_id: (a ``tool`` turn) the call it answers.
        name: (a ``tool`` turn) the function that answered.
    """

    role: Role
    content: str
    tool_calls: tuple[TemplateToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""

    def as_template_dict(self) -> dict[str, Any]:
        """The turn as a chat template reads it (keys beyond role and content only where
        set, so a template's ``message.tool_calls is defined`` tests stay false)."""
        turn: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            turn["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        if self.tool_call_id:
            turn["tool_call_id"] = self.tool_call_id
        if self.name:
            turn["name"] = self.name
        return turn


class FimTokens(msgspec.Struct, frozen=True, kw_only=True):
    """The text of a model's fill-in-the-middle tokens (read from its vocabulary)."""

    prefix: str
    suffix: str
    middle: str

    def prompt(self, before: str, after: str) -> str:
        """The prompt asking for the text between ``before`` and ``after`` (the
        prefix-suffix-middle order the FIM-trained coders use)."""
        return f"{self.prefix}{before}{self.suffix}{after}{self.middle}"


class ChatFormat(msgspec.Struct, frozen=True, kw_only=True):
    """What rendering a model's conversations needs.

    Attributes:
        template: the Jinja2 chat template (from the GGUF, or :data:`CHATML`).
        bos_token: the text of the model's BOS token (templates may write it).
        eos_token: the text of its EOS token.
        adds_bos: the tokenizer adds BOS by itself, so a BOS written by the template is
            dropped from the rendered text (it would be there twice).
        messages: the model takes the conversation as messages, not text: a remote model
            behind an OpenAI-compatible chat API, which applies its template itself.
            :func:`render_chat` then writes the messages as JSON (:func:`encode_messages`),
            which the backend decodes back and sends as they are.
        continues: (with ``messages``) the API continues a final assistant message, so a
            prompt can open the answer as it does for a local model; without it a turn the
            prompt opened cannot be continued (no cue, no answer prefix).
    """

    template: str
    bos_token: str = ""
    eos_token: str = ""
    adds_bos: bool = False
    messages: bool = False
    continues: bool = False

    @property
    def opens_answer(self) -> bool:
        """A prompt in this format can open the model's answer (a cue it continues)."""
        return not self.messages or self.continues


MESSAGES: Final = ChatFormat(template="", messages=True)
"""The format of a model that takes messages (a remote chat API)."""
MESSAGES_CONTINUED: Final = ChatFormat(template="", messages=True, continues=True)
"""The format of a model behind a chat API that continues a final assistant message."""


def render_chat(
    fmt: ChatFormat,
    messages: Sequence[ChatMessage],
    *,
    add_generation_prompt: bool = True,
    tools: Sequence[dict[str, Any]] = (),
) -> str:
    """The conversation as the model reads it.

    Args:
        fmt: the model's template and special tokens.
        messages: the turns, oldest first.
        add_generation_prompt: end with the header of the assistant's next turn.
        tools: the functions offered, in OpenAI's shape (``{"type": "function",
            "function": {...}}``), given to the template as ``tools`` (how Hugging Face
            renders them); none: the template sees no ``tools``.

    With ``fmt.messages`` the result is the messages as JSON (:func:`encode_messages`), and
    ``add_generation_prompt`` is the API's business.

    Raises:
        TemplateError: the template is not valid Jinja2 or raised while rendering.
    """
    if fmt.messages:
        return encode_messages(messages)
    try:
        text = _compiled(fmt.template).render(
            messages=[m.as_template_dict() for m in messages],
            **({"tools": list(tools)} if tools else {}),
            bos_token=fmt.bos_token,
            eos_token=fmt.eos_token,
            add_generation_prompt=add_generation_prompt,
            raise_exception=_raise,
            strftime_now=_strftime_now,
        )
    except jinja2.TemplateError as exc:
        raise TemplateError(f"chat template failed: {exc}") from exc
    except ValueError as exc:  # raise_exception() in the template
        raise TemplateError(f"chat template refused the messages: {exc}") from exc
    if fmt.adds_bos and fmt.bos_token and text.startswith(fmt.bos_token):
        text = text[len(fmt.bos_token) :]
    return text


def encode_messages(messages: Sequence[ChatMessage]) -> str:
    """The conversation as a JSON array of ``{"role", "content"}`` objects (what an
    OpenAI-compatible chat API takes as ``messages``)."""
    return msgspec.json.encode(list(messages)).decode()


def decode_messages(text: str) -> list[ChatMessage]:
    """The conversation :func:`encode_messages` wrote.

    Raises:
        TemplateError: ``text`` is not such a conversation.
    """
    try:
        return msgspec.json.decode(text, type=list[ChatMessage])
    except msgspec.DecodeError as exc:
        raise TemplateError(f"not a JSON list of chat messages: {exc}") from exc


_CACHE: dict[str, jinja2.Template] = {}


def _compiled(template: str) -> jinja2.Template:
    if template not in _CACHE:
        env = ImmutableSandboxedEnvironment(
            loader=jinja2.BaseLoader(),
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[jinja2.ext.loopcontrols],
        )
        env.filters["tojson"] = _tojson
        try:
            _CACHE[template] = env.from_string(template)
        except jinja2.TemplateError as exc:
            raise TemplateError(f"chat template does not compile: {exc}") from exc
    return _CACHE[template]


def _raise(message: str) -> None:
    raise ValueError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.datetime.now().strftime(fmt)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )
