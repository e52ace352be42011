"""Every documented request field of the APIs served, and what SwapOS does with it.

A client that sends a field SwapOS cannot honour is told so (a 400 naming the field), never
answered as if it had been honoured: a request for a tool call, a JSON answer or audio gets
one, or an error. The table (:data:`FIELDS`) lists each documented field of OpenAI's
``chat/completions`` and ``completions`` and of Ollama's ``chat`` and ``generate`` (and of
their messages and Ollama's ``options``) with its fate:

- **honoured**: it does what the API documents (docs/serve.md says how, where it differs);
- **metadata**: accepted and has no effect, as the API documents it (``user``, ``store``);
- **refused**: a 400 that names it and says why, unless its value is one that asks for
  nothing (``Field.allowed``: ``n: 1``, ``modalities: ["text"]``, ``think: false``).

Fields that no API documents are let through, as llama.cpp's server and vLLM do, and named
in the server's log (``serve.unknown_fields``). tests/test_serve_fields.py holds the table
against the fields the real ``openai`` and ``ollama`` clients can send, so a field added to
an API later cannot slip through unlisted.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec
import structlog

from swapos.serve.errors import RequestError

log = structlog.get_logger(__name__)


class Fate(enum.StrEnum):
    HONOURED = "honoured"
    METADATA = "metadata"
    REFUSED = "refused"


@dataclass(frozen=True)
class Field:
    """One field's fate; ``note`` says how it is honoured or why it is refused."""

    fate: Fate
    note: str = ""
    allowed: tuple[Any, ...] = ()
    """Values of a refused field that ask for nothing it would refuse (accepted)."""


H, M, R = Fate.HONOURED, Fate.METADATA, Fate.REFUSED
_TEXT_ONLY = "SwapOS serves text models"
_LOAD_SETTING = "a load setting: the profile sets it for the model (docs/profiles.md)"
_LOGPROBS = "log probabilities are not returned by SwapOS"
_SAMPLING_EXTRAS: Final = {
    "top_k": Field(H, "llama.cpp's top-k"),
    "min_p": Field(H, "llama.cpp's min-p"),
    "repeat_penalty": Field(H, "llama.cpp's repetition penalty"),
    "repeat_last_n": Field(H, "the window the penalties count"),
}
_OPENAI_COMMON: Final = {
    "model": Field(H),
    "max_tokens": Field(H),
    "temperature": Field(H),
    "top_p": Field(H),
    "seed": Field(H),
    "stop": Field(H),
    "stream": Field(H),
    "stream_options": Field(H, "include_usage: the last chunk carries usage (it always does)"),
    "n": Field(H, "one choice: n must be 1"),
    "user": Field(H, "the client whose model transitions are learned for prefetch"),
    "presence_penalty": Field(H),
    "frequency_penalty": Field(H),
    "logit_bias": Field(H, "token ids of the model's own vocabulary"),
    **_SAMPLING_EXTRAS,
}

FIELDS: Final[dict[str, dict[str, Field]]] = {
    "openai.chat": {
        **_OPENAI_COMMON,
        "messages": Field(H),
        "max_completion_tokens": Field(H),
        "tools": Field(H, "rendered by the model's chat template; calls parsed from its format"),
        "tool_choice": Field(H, "required and a named function are enforced by a grammar"),
        "parallel_tool_calls": Field(H),
        "response_format": Field(H, "json_object and json_schema, enforced by a grammar"),
        "prediction": Field(H, "drafts are looked up in it"),
        "modalities": Field(R, f"{_TEXT_ONLY}: only ['text']", allowed=(["text"],)),
        "audio": Field(R, f"{_TEXT_ONLY}: no audio output"),
        "functions": Field(R, "deprecated by OpenAI: send tools instead"),
        "function_call": Field(R, "deprecated by OpenAI: send tool_choice instead"),
        "logprobs": Field(R, _LOGPROBS, allowed=(False,)),
        "top_logprobs": Field(R, _LOGPROBS, allowed=(0,)),
        "reasoning_effort": Field(R, "SwapOS's models do not reason before answering"),
        "verbosity": Field(R, "SwapOS's models have no verbosity setting"),
        "web_search_options": Field(R, "SwapOS does not search the web"),
        "moderation": Field(R, "SwapOS does not moderate"),
        "metadata": Field(M),
        "store": Field(M, "SwapOS keeps no completions"),
        "service_tier": Field(M),
        "safety_identifier": Field(M),
        "prompt_cache_key": Field(M, "prefixes are kept by the KV cache for every request"),
        "prompt_cache_options": Field(M, "prefixes are kept by the KV cache's own policy"),
        "prompt_cache_retention": Field(M, "prefixes are kept by the KV cache's own policy"),
        "continue_final_message": Field(H, "vLLM's extension"),
        "add_generation_prompt": Field(H, "vLLM's extension"),
    },
    "openai.message": {
        "role": Field(H),
        "content": Field(H, "text parts only"),
        "name": Field(M, "the chat template decides whether it is shown"),
        "tool_calls": Field(H),
        "tool_call_id": Field(H),
        "refusal": Field(M),
        "audio": Field(R, f"{_TEXT_ONLY}: no audio"),
        "function_call": Field(R, "deprecated by OpenAI: send tool_calls instead"),
    },
    "openai.completions": {
        **_OPENAI_COMMON,
        "prompt": Field(H, "one prompt"),
        "suffix": Field(H, "fill-in-the-middle, for models whose vocabulary has FIM tokens"),
        "echo": Field(H, "the prompt comes back before the completion"),
        "best_of": Field(R, "SwapOS generates one choice", allowed=(1,)),
        "logprobs": Field(R, _LOGPROBS),
    },
    "ollama.chat": {
        "model": Field(H),
        "messages": Field(H),
        "tools": Field(H, "as on the OpenAI route"),
        "format": Field(H, '"json" or a JSON schema, enforced by a grammar'),
        "options": Field(H, "see ollama.options"),
        "stream": Field(H),
        "keep_alive": Field(H, "a residency hint"),
        "think": Field(R, "SwapOS's models do not think before answering", allowed=(False,)),
        "logprobs": Field(R, _LOGPROBS, allowed=(False,)),
        "top_logprobs": Field(R, _LOGPROBS, allowed=(0,)),
    },
    "ollama.message": {
        "role": Field(H),
        "content": Field(H),
        "tool_calls": Field(H),
        "tool_name": Field(H, "the function a tool message answers"),
        "images": Field(R, _TEXT_ONLY),
        "thinking": Field(M, "earlier thinking is not shown to the model"),
    },
    "ollama.generate": {
        "model": Field(H),
        "prompt": Field(H),
        "suffix": Field(H, "fill-in-the-middle, for models whose vocabulary has FIM tokens"),
        "system": Field(H),
        "raw": Field(H),
        "format": Field(H, '"json" or a JSON schema, enforced by a grammar'),
        "options": Field(H, "see ollama.options"),
        "stream": Field(H),
        "keep_alive": Field(H, "a residency hint"),
        "images": Field(R, _TEXT_ONLY),
        "template": Field(R, "the model's own chat template is used"),
        "context": Field(R, "deprecated by Ollama: use /api/chat"),
        "think": Field(R, "SwapOS's models do not think before answering", allowed=(False,)),
        "logprobs": Field(R, _LOGPROBS, allowed=(False,)),
        "top_logprobs": Field(R, _LOGPROBS, allowed=(0,)),
        "width": Field(R, f"{_TEXT_ONLY}: no image generation"),
        "height": Field(R, f"{_TEXT_ONLY}: no image generation"),
        "steps": Field(R, f"{_TEXT_ONLY}: no image generation"),
    },
    "ollama.options": {
        "num_predict": Field(H),
        "temperature": Field(H),
        "top_p": Field(H),
        "top_k": Field(H),
        "min_p": Field(H),
        "seed": Field(H),
        "stop": Field(H),
        "repeat_penalty": Field(H),
        "repeat_last_n": Field(H),
        "presence_penalty": Field(H),
        "frequency_penalty": Field(H),
        "num_ctx": Field(H, "the model is reloaded with that context, up to its cap"),
        "typical_p": Field(R, "typical sampling is not implemented", allowed=(1.0, 1)),
        "tfs_z": Field(R, "tail-free sampling is not implemented", allowed=(1.0, 1)),
        "mirostat": Field(R, "mirostat sampling is not implemented", allowed=(0,)),
        "mirostat_tau": Field(R, "mirostat sampling is not implemented", allowed=(5.0, 5)),
        "mirostat_eta": Field(R, "mirostat sampling is not implemented", allowed=(0.1,)),
        "penalize_newline": Field(R, "newlines are penalised as other tokens", allowed=(True,)),
        "num_keep": Field(R, "SwapOS never shifts the context"),
        "num_batch": Field(R, _LOAD_SETTING),
        "num_gpu": Field(R, _LOAD_SETTING),
        "main_gpu": Field(R, _LOAD_SETTING),
        "low_vram": Field(R, _LOAD_SETTING, allowed=(False,)),
        "f16_kv": Field(R, _LOAD_SETTING),
        "logits_all": Field(R, _LOAD_SETTING, allowed=(False,)),
        "vocab_only": Field(R, _LOAD_SETTING, allowed=(False,)),
        "use_mmap": Field(R, _LOAD_SETTING),
        "use_mlock": Field(R, _LOAD_SETTING, allowed=(False,)),
        "embedding_only": Field(R, _LOAD_SETTING, allowed=(False,)),
        "numa": Field(R, _LOAD_SETTING, allowed=(False,)),
        "num_thread": Field(R, _LOAD_SETTING),
    },
}
"""The fate of every documented field, by API (``openai.chat``...) and field name."""


class FieldRefused(Exception):
    """A documented field SwapOS does not honour was sent (``field`` is its path)."""

    def __init__(self, field: str, note: str) -> None:
        super().__init__(f"{field} is not supported: {note}")
        self.field = field
        self.note = note


def check(api: str, fields: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Refuse the first refused field of ``api`` that ``fields`` sets to a value that asks
    for something; returns the names no API documents (to be logged, not refused).

    ``fields`` maps names to values, either decoded or as ``msgspec.Raw`` (decoded here
    only for refused fields). ``prefix`` is put before names in errors (``options.``).

    Raises:
        FieldRefused: naming the field and why.
    """
    table = FIELDS[api]
    unknown = []
    for name, value in fields.items():
        row = table.get(name)
        if row is None:
            unknown.append(prefix + name)
            continue
        if row.fate is not Fate.REFUSED:
            continue
        decoded = msgspec.json.decode(value) if isinstance(value, msgspec.Raw) else value
        if decoded is None or any(_same(decoded, a) for a in row.allowed):
            continue
        raise FieldRefused(prefix + name, row.note)
    return unknown


def _same(value: Any, allowed: Any) -> bool:
    return type(value) is type(allowed) and value == allowed


NESTED: Final[dict[str, dict[str, str]]] = {
    "openai.chat": {"messages": "openai.message"},
    "ollama.chat": {"messages": "ollama.message", "options": "ollama.options"},
    "ollama.generate": {"options": "ollama.options"},
}
"""Fields whose items (a list's) or keys (an object's) have a table of their own."""


def check_body(api: str, body: bytes) -> list[str]:
    """:func:`check` on a JSON body's fields and on its nested tables' (:data:`NESTED`);
    the names no API documents, for the log. A body that is not a JSON object is left to
    the typed decode that follows (it says what is wrong).

    Raises:
        FieldRefused: the first refused field sent, by its path (``messages[2].audio``).
    """
    fields = _object(body)
    if fields is None:
        return []
    unknown = check(api, fields)
    for name, inner_api in NESTED.get(api, {}).items():
        raw = fields.get(name)
        if raw is None:
            continue
        items = _list(raw) if name == "messages" else [_object(raw)]
        for i, item in enumerate(items):
            if item is not None:
                where = f"{name}[{i}]." if name == "messages" else f"{name}."
                unknown += check(inner_api, item, prefix=where)
    return unknown


def _object(raw: bytes | msgspec.Raw) -> dict[str, msgspec.Raw] | None:
    try:
        return msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
    except (msgspec.DecodeError, RecursionError):
        return None


def _list(raw: msgspec.Raw) -> list[dict[str, msgspec.Raw] | None]:
    try:
        items = msgspec.json.decode(raw, type=list[msgspec.Raw])
    except (msgspec.DecodeError, RecursionError):
        return []
    return [_object(item) for item in items]


def checked_fields(api: str, raw: bytes) -> None:
    """Refuse a documented field SwapOS does not honour (a 400 naming it); log the fields
    no API documents (let through).

    Raises:
        RequestError: naming the refused field.
    """
    try:
        unknown = check_body(api, raw)
    except FieldRefused as exc:
        raise RequestError(400, str(exc), param=exc.field) from exc
    if unknown:
        log.info("serve.unknown_fields", api=api, fields=unknown)
