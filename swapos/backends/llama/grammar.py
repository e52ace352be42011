"""A :class:`~swapos.data.constraint.Constraint` enforced by llama.cpp's grammar sampler.

The decode loop samples from numpy logits (:mod:`~swapos.backends.llama.sampling`);
:class:`GrammarGate` puts llama.cpp's grammar in front of that choice the way llama.cpp's
own common sampler does: the token sampled freely is checked alone (cheap), and only when
the grammar rejects it are all the logits masked (every token checked) and the token
sampled again from what the grammar allows. So an answer the model writes in the grammar's
shape anyway costs almost nothing extra.

A token is handed to :meth:`GrammarGate.accept` only once the grammar allowed it:
llama.cpp aborts the process on a token its grammar rejects.
"""

from __future__ import annotations

import ctypes
from typing import Any

import llama_cpp
import numpy as np

from swapos.data.constraint import Constraint
from swapos.errors import GenerationError

_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")], align=True)
assert _TOKEN_DATA.itemsize == ctypes.sizeof(llama_cpp.llama_token_data)


class GrammarGate:
    """One generation's grammar over a model's vocabulary (create, use, :meth:`close`).

    A lazy constraint is triggered by whole tokens only (llama.cpp's trigger tokens, not its
    trigger patterns): a pattern's match may start inside a token, and llama.cpp replays
    that token's text into the grammar, aborting the process when the grammar rejects it.
    A trigger that is not one token of this vocabulary is dropped; with none left the gate
    is :attr:`idle` (the text is free).
    """

    idle = False

    def __init__(self, vocab: Any, n_vocab: int, constraint: Constraint) -> None:
        gbnf = constraint.gbnf.encode()
        if constraint.lazy:
            ids = [t for t in (_one_token(vocab, text) for text in constraint.triggers) if t >= 0]
            tokens = (llama_cpp.llama_token * len(ids))(*ids)
            self._sampler = (
                llama_cpp.llama_sampler_init_grammar_lazy_patterns(
                    vocab, gbnf, b"root", None, 0, tokens, len(ids)
                )
                if ids
                else None
            )
            self.idle = not ids
        else:
            self._sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf, b"root")
        if not self._sampler and not self.idle:
            raise GenerationError(
                f"llama.cpp could not compile the grammar of {constraint.what or 'the request'}"
            )
        self._all = np.zeros(n_vocab, dtype=_TOKEN_DATA)
        self._all["id"] = np.arange(n_vocab, dtype=np.int32)
        self._one = np.zeros(1, dtype=_TOKEN_DATA)
        self._all_array = _array_of(self._all)
        self._one_array = _array_of(self._one)

    def allows(self, token: int) -> bool:
        """Whether the grammar accepts ``token`` next."""
        if self.idle:
            return True
        self._one["id"][0], self._one["logit"][0] = token, 0.0
        self._one_array.size, self._one_array.selected = 1, -1
        llama_cpp.llama_sampler_apply(self._sampler, ctypes.byref(self._one_array))
        return bool(np.isfinite(self._one["logit"][0]))

    def mask(self, logits: np.ndarray) -> np.ndarray:
        """``logits`` with every token the grammar rejects next at -inf.

        Raises:
            GenerationError: the grammar allows no token at all (a dead end).
        """
        self._all["logit"] = logits
        self._all_array.size, self._all_array.selected, self._all_array.sorted = (
            len(self._all),
            -1,
            False,
        )
        llama_cpp.llama_sampler_apply(self._sampler, ctypes.byref(self._all_array))
        masked = np.array(self._all["logit"], dtype=np.float32)
        if not np.isfinite(masked).any():
            raise GenerationError("the grammar allows no next token (a dead end)")
        return masked

    def accept(self, token: int) -> None:
        """Advance the grammar past ``token`` (one it allowed)."""
        if not self.idle:
            llama_cpp.llama_sampler_accept(self._sampler, token)

    def close(self) -> None:
        if self._sampler:
            llama_cpp.llama_sampler_free(self._sampler)
            self._sampler = None


def _one_token(vocab: Any, text: str) -> int:
    """The id of the one token ``text`` is in this vocabulary (special tokens parsed), or
    -1 when it is several or none."""
    data = text.encode()
    buf = (llama_cpp.llama_token * 8)()
    n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, 8, False, True)
    return int(buf[0]) if n == 1 else -1


def _array_of(data: np.ndarray) -> Any:
    return llama_cpp.llama_token_data_array(
        data=data.ctypes.data_as(llama_cpp.llama_token_data_p),
        size=len(data),
        selected=-1,
        sorted=False,
    )
