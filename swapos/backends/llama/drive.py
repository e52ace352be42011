"""Driving a decode loop: the evaluations it asks for, decoded on its context.

A decode loop (:class:`~swapos.backends.llama.decode.Decoder`) is a generator: each time it
needs tokens of its sequence evaluated it yields an :class:`Eval`, and it is sent back the
index in the decoded batch of the first of those tokens (the logits rows it asked for follow
from there), or :data:`NO_ROOM` when llama.cpp found no room for them in the KV cache. The
loop reads its logits as soon as it is resumed, before its driver decodes anything else.

Two drivers: :func:`drive_alone`, one generation on a model's own context in the caller's
worker thread (each evaluation its own batch: the calls the loop made itself before slots),
and the slot engine (``backends/llama/slots.py``), which decodes the steps of a model's
generations side by side.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Sequence
from typing import Any

import llama_cpp

from swapos.backends.base import GenerationOutput
from swapos.backends.llama.batch import VerifyBatch
from swapos.policies.drafting import MAX_DRAFT

NO_ROOM = -1
"""Sent back to a loop whose tokens llama.cpp found no room for (``llama_decode`` status 1)."""


@dataclasses.dataclass(frozen=True)
class Eval:
    """Tokens a decode loop wants evaluated on its sequence.

    Attributes:
        tokens: the tokens, at consecutive positions.
        start: the position of the first.
        every: logits at every token (a verification batch), else at the last only.
        prefill: a chunk of what the loop reads (its prompt, or its answer read again
            before a snapshot): the slot engine decodes it alone, never beside another
            sequence's tokens, so its KV values are what a generation alone computes.
    """

    tokens: Sequence[int]
    start: int
    every: bool = False
    prefill: bool = False


Steps = Generator[Eval, int, GenerationOutput]
"""A decode loop: yields what to evaluate, is sent the batch index, returns its output."""


def drive_alone(steps: Steps, ctx: Any) -> GenerationOutput:
    """Run ``steps`` to its end on ``ctx``'s one sequence (sequence 0), each evaluation its
    own ``llama_decode``: ``llama_batch_get_one`` for a chunk or a token, a verification
    batch for logits at every token.

    Raises:
        RuntimeError: ``llama_decode`` failed (not for lack of room).
        Whatever the loop raises (``Aborted`` among them).
    """
    batch: VerifyBatch | None = None
    try:
        want = next(steps)
        while True:
            if want.every:
                batch = batch or VerifyBatch(MAX_DRAFT + 1)
                status = batch.decode(ctx, want.tokens, want.start)
            else:
                arr = (llama_cpp.llama_token * len(want.tokens))(*want.tokens)
                status = llama_cpp.llama_decode(
                    ctx, llama_cpp.llama_batch_get_one(arr, len(want.tokens))
                )
            if status not in (0, 1):
                raise RuntimeError(f"llama_decode failed with status {status}")
            want = steps.send(NO_ROOM if status == 1 else 0)
    except StopIteration as done:
        out: GenerationOutput = done.value
        return out
    finally:
        steps.close()
        if batch is not None:
            batch.close()
