"""Tokenizer: text to token ids and back, and vocab-only token counters with chat formats."""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any

import llama_cpp

from swapos.backends.llama.runtime import init_llama
from swapos.errors import ModelFileError
from swapos.models.gguf import GGUFInfo
from swapos.models.templates import ChatFormat, FimTokens


def tokenize(vocab: Any, text: str, *, special: bool = False) -> list[int]:
    """Token ids of ``text``, BOS added as the model wants; ``special``: special-token text
    (a chat template's ``<|im_start|>``) is parsed into those tokens."""
    data = text.encode()
    size = len(data) + 8
    while True:
        buf = (llama_cpp.llama_token * size)()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, size, True, special)
        if n >= 0:
            return list(buf[:n])
        size = -n


def piece(vocab: Any, token: int) -> bytes:
    """The bytes of one token (control tokens render as nothing)."""
    buf = ctypes.create_string_buffer(64)
    n = llama_cpp.llama_token_to_piece(vocab, token, buf, 64, 0, False)
    if n < 0:
        buf = ctypes.create_string_buffer(-n)
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, -n, 0, False)
    return buf.raw[:n]


class TokenCounter:
    """A vocab-only llama.cpp model used as a token counting function."""

    def __init__(self, path: str) -> None:
        init_llama()
        mparams = llama_cpp.llama_model_default_params()
        mparams.vocab_only = True
        mparams.n_gpu_layers = 0  # a vocabulary-only load has no layers to offload
        self._model = llama_cpp.llama_model_load_from_file(path.encode(), mparams)
        if not self._model:
            raise ModelFileError(
                f"llama.cpp could not read the vocabulary of {path}; check that it is a "
                "complete GGUF model"
            )
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        weakref.finalize(self, llama_cpp.llama_model_free, self._model)

    def __call__(self, text: str) -> int:
        return len(tokenize(self._vocab, text, special=True))

    def chat_format(self, template: str) -> ChatFormat:
        """``template`` with this vocabulary's BOS/EOS text and whether it adds BOS."""
        return ChatFormat(
            template=template,
            bos_token=self._text(llama_cpp.llama_vocab_bos(self._vocab)),
            eos_token=self._text(llama_cpp.llama_vocab_eos(self._vocab)),
            adds_bos=bool(llama_cpp.llama_vocab_get_add_bos(self._vocab)),
        )

    def fim_tokens(self) -> FimTokens | None:
        """The fill-in-the-middle tokens llama.cpp found in this vocabulary (from the
        GGUF's ``tokenizer.ggml.fim_*_token_id`` keys, or by their text when it loaded the
        token table), None unless all three are there."""
        ids = (
            llama_cpp.llama_vocab_fim_pre(self._vocab),
            llama_cpp.llama_vocab_fim_suf(self._vocab),
            llama_cpp.llama_vocab_fim_mid(self._vocab),
        )
        if min(ids) < 0:
            return None
        prefix, suffix, middle = (self._text(t) for t in ids)
        return FimTokens(prefix=prefix, suffix=suffix, middle=middle)

    def _text(self, token: int) -> str:
        if token < 0:
            return ""
        raw = llama_cpp.llama_vocab_get_text(self._vocab, token)
        return raw.decode(errors="replace") if raw else ""


_COUNTERS: dict[str, TokenCounter] = {}
_COUNTERS_LOCK = threading.Lock()


def shared_counter(path: str, info: GGUFInfo) -> TokenCounter:
    """The process's counter for ``path``'s tokenizer, made on first use.

    A vocabulary-only load holds ~45 MiB for Gemma's 262k tokens. Models of one family
    share their tokenizer, so one counter serves every file with the same architecture and
    vocabulary size, for the life of the process. (Counts only size prompts; the Generator
    tokenizes with the model itself.)
    """
    key = f"{info.architecture}:{info.vocab_size}"
    with _COUNTERS_LOCK:
        if key not in _COUNTERS:
            _COUNTERS[key] = TokenCounter(path)
        return _COUNTERS[key]
