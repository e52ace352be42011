"""A smaller resident model drafting for a larger one, on the smaller model's own context.

The draft model (``policies/model_drafts.py`` chooses it and the length) keeps in its KV
cache the tokens the target has decoded, prompt first: at each draft it drops the cells past
what the target accepted, evaluates what the target added, and proposes ``d`` greedy tokens
one step at a time. The target verifies them in one batch as it verifies a lookup draft
(``backends/llama/decode.py``), so the output is the target's, whoever drafted.

The draft model is borrowed, never waited for: each draft takes its lock only if it is free
(a generation of its own, a close, goes first and this step decodes plain), and a generation
of its own in between (which clears its KV cache) is seen by its use count, so its cells are
read again from the prompt. Its context holds at most its own ``n_ctx``: past that, no more
drafts. Its cells are left as drafting left them; its next generation clears them, as every
generation does.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, Protocol

import llama_cpp
import numpy as np

from swapos.backends.llama import kv_state
from swapos.backends.llama.batch import decode_chunks


class Lender(Protocol):
    """A resident model that lends its llama.cpp handles when they are free."""

    @property
    def name(self) -> str: ...

    def lend(self) -> contextlib.AbstractContextManager[tuple[Any, int] | None]:
        """Its handles (``decode.Handles``) and its use count, under its lock, if the lock
        is free now; None otherwise (or when it is closed)."""
        ...


def common_prefix(a: list[int], b: list[int], start: int = 0) -> int:
    """The length of the common prefix of ``a`` and ``b``, known to be at least ``start``."""
    n = min(len(a), len(b))
    i = min(start, n)
    while i < n and a[i] == b[i]:
        i += 1
    return i


class ModelDrafter:
    """One target generation's drafts from one draft model.

    Args:
        lender: the draft model.
        length: the draft length to use now, given the tokens left (0: none).
        abort: the generation's abort flag (polled between the draft model's chunks).
    """

    def __init__(
        self, lender: Lender, length: Callable[[int], int], abort: threading.Event
    ) -> None:
        self.lender = lender
        self.length = length
        self.abort = abort
        self.cached: list[int] = []  # what the draft model's KV cache holds, from position 0
        self.agreed = 0  # a prefix of ``cached`` known to be the target's tokens
        self.uses = -1  # the draft model's use count when ``cached`` was last right
        self.full = False  # its context has no room for the target's tokens any more
        self.accepted = 0
        self.tested = 0

    @property
    def name(self) -> str:
        return self.lender.name

    def observe(self, drafted: int, accepted: int) -> None:
        """The target verified ``drafted`` of this drafter's tokens and kept ``accepted``."""
        self.accepted += accepted
        self.tested += min(drafted, accepted + 1)

    def propose(self, history: list[int], d: int) -> list[int]:
        """Up to ``d`` greedy tokens the draft model expects after ``history`` (the target's
        prompt and answer, its last token not yet evaluated by the target); empty when the
        draft model is busy, closed or full."""
        if d <= 0 or self.full or not history:
            return []
        with self.lender.lend() as lent:
            if lent is None:
                return []
            h, uses = lent
            return self._draft(h, uses, history, d)

    def _draft(self, h: Any, uses: int, history: list[int], d: int) -> list[int]:
        if uses != self.uses:  # it generated (or was cleared) since: start again
            kv_state.clear(h.ctx)
            self.cached, self.agreed, self.uses = [], 0, uses
        keep = min(common_prefix(self.cached, history, self.agreed), len(history) - 1)
        if keep < len(self.cached) and not kv_state.truncate(h.ctx, keep):
            kv_state.clear(h.ctx)
            keep = 0
        del self.cached[keep:]
        n_past = decode_chunks(
            h.ctx, history[keep:], n_past=keep, n_batch=h.n_batch, n_ctx=h.n_ctx,
            abort=self.abort,
        )  # fmt: skip
        if n_past is None:
            self.full = True
            kv_state.clear(h.ctx)
            self.cached, self.agreed = [], 0
            return []
        self.cached.extend(history[keep:])
        self.agreed = len(history)
        draft: list[int] = []
        while True:
            logits = llama_cpp.llama_get_logits_ith(h.ctx, -1)
            token = int(np.argmax(np.ctypeslib.as_array(logits, shape=(h.n_vocab,))))
            draft.append(token)
            if len(draft) >= d or llama_cpp.llama_vocab_is_eog(h.vocab, token):
                return draft
            if n_past + 1 > h.n_ctx:
                return draft
            arr = (llama_cpp.llama_token * 1)(token)
            status = llama_cpp.llama_decode(h.ctx, llama_cpp.llama_batch_get_one(arr, 1))
            if status != 0:  # no room (1) or a failure: what was drafted still stands,
                self.uses = -1  # and the next draft starts again from an empty cache
                return draft
            n_past += 1
            self.cached.append(token)
