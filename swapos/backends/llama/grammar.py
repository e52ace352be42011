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
    """One generation's grammar over a model's vocabulary (create, use, :meth:`close`)."""

    def __init__(self, vocab: Any, n_vocab: int, constraint: Constraint) -> None:
        gbnf = constraint.gbnf.encode()
        if constraint.lazy:
            triggers = [t.encode() for t in constraint.triggers]
            patterns = (ctypes.c_char_p * len(triggers))(*triggers)
            self._sampler = llama_cpp.llama_sampler_init_grammar_lazy_patterns(
                vocab, gbnf, b"root", patterns, len(triggers), None, 0
            )
        else:
            self._sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf, b"root")
        if not self._sampler:
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
        llama_cpp.llama_sampler_accept(self._sampler, token)

    def close(self) -> None:
        if self._sampler:
            llama_cpp.llama_sampler_free(self._sampler)
            self._sampler = None


def _array_of(data: np.ndarray) -> Any:
    return llama_cpp.llama_token_data_array(
        data=data.ctypes.data_as(llama_cpp.llama_token_data_p),
        size=len(data),
        selected=-1,
        sorted=False,
    )
