"""A verification batch: tokens of one sequence at consecutive positions, logits at each.

``llama_batch_get_one`` (what prefill and plain decode use) asks for the last position's
logits only. Verifying a draft needs the logits after every token of it, so the batch is
allocated with ``llama_batch_init`` and every position is marked as an output. The context
must allow that many outputs per batch (``n_outputs_max``, set at load).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import llama_cpp


class VerifyBatch:
    """A reusable batch of at most ``capacity`` tokens for sequence 0; free it with
    :meth:`close` (the decode loop does, in a ``finally``)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._batch: Any = llama_cpp.llama_batch_init(capacity, 0, 1)

    def decode(self, ctx: Any, tokens: Sequence[int], start: int) -> int:
        """Evaluate ``tokens`` at positions ``start...``, logits at each; llama.cpp's status
        (0 ok, 1 no room in the KV cache, other: an error)."""
        assert 0 < len(tokens) <= self.capacity, "a verification batch must fit its capacity"
        b = self._batch
        for i, token in enumerate(tokens):
            b.token[i] = token
            b.pos[i] = start + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1
        b.n_tokens = len(tokens)
        return int(llama_cpp.llama_decode(ctx, b))

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
