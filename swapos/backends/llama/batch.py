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
        """Evaluate ``tokens`` at positions ``start...`` of sequence 0, logits at each;
        llama.cpp's status (0 ok, 1 no room in the KV cache, other: an error)."""
        return self.decode_rows(ctx, [(t, start + i, 0) for i, t in enumerate(tokens)])

    def decode_rows(self, ctx: Any, rows: Sequence[tuple[int, int, int]]) -> int:
        """Evaluate ``(token, position, sequence)`` rows, logits at each (draws side by
        side: one row per live sequence); llama.cpp's status as for :meth:`decode`."""
        assert 0 < len(rows) <= self.capacity, "a batch must fit its capacity"
        b = self._batch
        for i, (token, pos, seq) in enumerate(rows):
            b.token[i] = token
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = 1
        b.n_tokens = len(rows)
        return int(llama_cpp.llama_decode(ctx, b))

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
