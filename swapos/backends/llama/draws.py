"""Draws side by side: sampled continuations of one prompt as llama.cpp sequences of one
context that share the prompt's KV cells, decoded in lockstep (one token per live
sequence per batch).

The prompt is prefilled once on sequence 0; each draw's sequence gets its cells by
``llama_memory_seq_cp`` (with a unified KV cache the cells are shared, not copied), and
its own random generator and stop stream. A draw that ends leaves the batch; the others
go on. ``width`` draws run at a time (1: in turn, the same code path, for comparison).

This is the backend's building block; the pipeline still draws in turn through
``LoadedModel.generate`` (issue 26, part 4, is not wired in). ``bench decode`` measures
what it would buy per model and machine.
"""

from __future__ import annotations

import codecs
import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

import llama_cpp
import numpy as np

from swapos.backends.llama.batch import VerifyBatch
from swapos.backends.llama.decode import sample
from swapos.backends.llama.runtime import Aborted
from swapos.backends.llama.vocab import piece
from swapos.backends.stops import StopStream
from swapos.data.generation import StopReason
from swapos.data.sampling import SamplingParams


@dataclasses.dataclass
class Draw:
    """One draw's state, then its result (``text``, ``tokens``, ``stop_reason``)."""

    seq: int
    params: SamplingParams
    rng: np.random.Generator
    stream: StopStream
    pending: int = -1
    pos: int = 0
    tokens: int = 0
    stop_reason: StopReason | None = None
    utf8: Any = dataclasses.field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )

    @property
    def text(self) -> str:
        return self.stream.text


def open_context(model: Any, *, sequences: int, n_ctx: int, threads: int) -> Any:
    """A context on ``model``'s weights for ``sequences`` sequences sharing ``n_ctx``
    unified KV cells (the caller frees it with ``llama_free``)."""
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = n_ctx
    cparams.n_batch = cparams.n_ubatch = 128
    cparams.n_seq_max = sequences
    cparams.n_outputs_max = max(sequences, 1)
    cparams.kv_unified = True
    cparams.n_threads = cparams.n_threads_batch = threads
    cparams.no_perf = True
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    if not ctx:
        raise RuntimeError(f"llama.cpp could not create a {sequences}-sequence context")
    return ctx


def decode_draws(
    ctx: Any,
    vocab: Any,
    n_vocab: int,
    prompt: list[int],
    params: Sequence[SamplingParams],
    *,
    width: int,
    abort: threading.Event,
) -> list[Draw]:
    """Draw one continuation of ``prompt`` per entry of ``params``, ``width`` at a time
    (sequences 1..width of ``ctx``, which must allow ``width + 1`` sequences)."""
    mem = llama_cpp.llama_get_memory(ctx)
    llama_cpp.llama_memory_clear(mem, True)
    for i in range(0, len(prompt), 128):
        chunk = prompt[i : i + 128]
        arr = (llama_cpp.llama_token * len(chunk))(*chunk)
        if llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(arr, len(chunk))) != 0:
            raise RuntimeError("prefill failed")
    draws = [
        Draw(seq=0, params=p, rng=np.random.default_rng(p.seed), stream=StopStream(p.stop))
        for p in params
    ]
    for d in draws:  # every draw's first token comes from the prompt's last logits
        d.pending, d.pos = sample(ctx, n_vocab, d.params, d.rng), len(prompt)
    batch = VerifyBatch(width)
    try:
        for start in range(0, len(draws), width):
            group = draws[start : start + width]
            for j, d in enumerate(group):
                d.seq = j + 1
                llama_cpp.llama_memory_seq_cp(mem, 0, d.seq, -1, -1)
            _lockstep(_On(ctx, mem, vocab, n_vocab), group, batch, abort)
    finally:
        batch.close()
    return draws


@dataclasses.dataclass(frozen=True)
class _On:
    """The llama.cpp objects the draws run on."""

    ctx: Any
    mem: Any
    vocab: Any
    n_vocab: int


def _lockstep(on: _On, group: list[Draw], batch: VerifyBatch, abort: threading.Event) -> None:
    ctx, mem, vocab, n_vocab = on.ctx, on.mem, on.vocab, on.n_vocab
    live = list(group)
    while live:
        if abort.is_set():
            raise Aborted
        for d in list(live):
            if _emit(vocab, d):
                live.remove(d)
                llama_cpp.llama_memory_seq_rm(mem, d.seq, -1, -1)
        if not live:
            return
        if batch.decode_rows(ctx, [(d.pending, d.pos, d.seq) for d in live]) != 0:
            for d in live:
                d.stop_reason = "context"
            return
        for row, d in enumerate(live):
            d.pos += 1
            d.pending = sample(ctx, n_vocab, d.params, d.rng, row)


def _emit(vocab: Any, d: Draw) -> bool:
    """Take ``d``'s pending token; True when the draw has ended."""
    if llama_cpp.llama_vocab_is_eog(vocab, d.pending):
        d.stop_reason = "eos"
    else:
        d.tokens += 1
        d.stream.add(d.utf8.decode(piece(vocab, d.pending)))
        if d.stream.stopped:
            d.stop_reason = "stop"
        elif d.tokens >= d.params.max_tokens:
            d.stop_reason = "length"
    if d.stop_reason is not None and d.stop_reason != "stop":
        d.stream.finish(d.utf8.decode(b"", final=True))
    return d.stop_reason is not None
