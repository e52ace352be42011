"""A verification batch: tokens of one sequence at consecutive positions, logits at each.

``llama_batch_get_one`` (what prefill and plain decode use) asks for the last position's
logits only. Verifying a draft needs the logits after every token of it, so the batch is
allocated with ``llama_batch_init`` and every position is marked as an output. The context
must allow that many outputs per batch (``n_outputs_max``, set at load).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import llama_cpp

from swapos.backends.llama.runtime import Aborted


def decode_chunks(
    ctx: Any,
    tokens: Sequence[int],
    *,
    n_past: int,
    n_batch: int,
    n_ctx: int,
    abort: threading.Event,
) -> int | None:
    """Evaluate ``tokens`` on sequence 0 from position ``n_past`` in ``n_batch`` chunks
    (logits of each chunk's last position only): what prefill does, in the decode loop and
    for draws side by side alike, so the same chunks give the same KV values. Returns the
    new ``n_past``, or None when the context is full.

    Raises:
        Aborted: ``abort`` was set between two chunks.
        RuntimeError: ``llama_decode`` failed otherwise.
    """
    for i in range(0, len(tokens), n_batch):
        if abort.is_set():
            raise Aborted
        chunk = tokens[i : i + n_batch]
        if n_past + len(chunk) > n_ctx:
            return None
        arr = (llama_cpp.llama_token * len(chunk))(*chunk)
        status = llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(arr, len(chunk)))
        if status == 1:
            return None
        if status != 0:
            raise RuntimeError(f"llama_decode failed with status {status}")
        n_past += len(chunk)
    return n_past


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

    def decode_rows(
        self,
        ctx: Any,
        rows: Sequence[tuple[int, int, int]],
        outputs: Sequence[bool] | None = None,
    ) -> int:
        """Evaluate ``(token, position, sequence)`` rows, logits at each (draws side by
        side: one row per live sequence) or where ``outputs`` says; llama.cpp's status as
        for :meth:`decode`."""
        assert 0 < len(rows) <= self.capacity, "a batch must fit its capacity"
        b = self._batch
        for i, (token, pos, seq) in enumerate(rows):
            b.token[i] = token
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = 1 if outputs is None or outputs[i] else 0
        b.n_tokens = len(rows)
        return int(llama_cpp.llama_decode(ctx, b))

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
