"""Draws side by side: N sampled continuations of one prompt as N sequences of one context.

The model's own context holds one sequence and one logits row per batch (``loading``), so a
call makes a second, short-lived context on the same weights, sized for exactly this call
(:func:`draws_context_cells`): a *unified* KV cache (``kv_unified``) in which the prompt is
prefilled once on sequence 0 and shared with sequences 1..N-1 by ``llama_memory_seq_cp``
(the cells gain sequence ids; nothing is copied). Each step then decodes one batch holding
the next token of every draw still running (token ``i`` of the batch at its draw's position
on its draw's sequence, logits on), and each draw samples from its own logits row
(``llama_get_logits_ith``) with its own ``numpy`` generator seeded as a draw in turn is
(:func:`~swapos.backends.llama.sampling.sample_logits`, :class:`~swapos.backends.stops.
StopStream`, the same end-of-generation, ``max_tokens`` and context rules as
:mod:`~swapos.backends.llama.decode`). A draw that ends is handed to ``on_draw`` at once and
its cells are dropped (``llama_memory_seq_rm``), while the others go on; ``stop`` ends the
rest. The context is freed when the call returns, fails or is cancelled.

Memory: the draws context holds ``draws_context_cells`` KV cells (the prompt once, plus each
draw's evaluated tokens) on top of the model's own context, for the length of the call (for
Qwen2.5-Coder 0.5B at f16, 12 KiB per cell: a 1000-token prompt and 6 draws of 512 tokens
is ~48 MiB), plus its compute buffer for ``n_batch`` tokens. The ledger does not count it.
"""

from __future__ import annotations

import codecs
import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio.from_thread
import llama_cpp
import numpy as np

from swapos.backends.base import DrawOutput, GenerationOutput
from swapos.backends.llama import kv_state
from swapos.backends.llama.batch import VerifyBatch, decode_chunks
from swapos.backends.llama.handles import Handles
from swapos.backends.llama.runtime import Aborted
from swapos.backends.llama.sampling import sample_logits
from swapos.backends.llama.vocab import piece
from swapos.backends.stops import StopStream
from swapos.data.generation import GenerationStats, StopReason
from swapos.data.prefix import PrefixState
from swapos.data.sampling import SamplingParams
from swapos.errors import GenerationError
from swapos.models.spec import ModelSpec
from swapos.policies.draws import draw_cells
from swapos.policies.memory import KV_TYPES


def draws_context_cells(prompt_tokens: int, max_tokens: Sequence[int], n_ctx: int) -> int:
    """KV cells a call needs: the prompt once, plus per draw the tokens it may evaluate (all
    but its last sampled one, and never past the model's ``n_ctx``: a draw in turn stops
    there too)."""
    return prompt_tokens + sum(draw_cells(prompt_tokens, m, n_ctx) for m in max_tokens)


@dataclasses.dataclass
class _Draw:
    """One running draw: its sampler state and where its sequence stands."""

    index: int
    params: SamplingParams
    rng: np.random.Generator
    pos: int
    utf8: codecs.IncrementalDecoder = dataclasses.field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )
    stream: StopStream = dataclasses.field(default_factory=lambda: StopStream(()))
    count: int = 0
    row: int = -1
    pending: int | None = None
    generated: list[int] = dataclasses.field(default_factory=list)
    reason: StopReason | None = None
    first: float = 0.0
    end: float = 0.0


class DrawsDecoder:
    """One :meth:`~swapos.backends.base.DrawsModel.generate_draws` call (runs in the worker
    thread that holds the model's lock)."""

    def __init__(
        self,
        handles: Handles,
        spec: ModelSpec,
        abort: threading.Event,
        *,
        on_draw: Callable[[DrawOutput], None] | None,
        stop: Callable[[], bool] | None,
        started: float,
    ) -> None:
        self.h = handles
        self.spec = spec
        self.abort = abort
        self.on_draw = on_draw
        self.stop = stop
        self.started = started
        self.finished: list[DrawOutput] = []

    def run(
        self, prompt: list[int], draws: Sequence[SamplingParams], restore: PrefixState | None
    ) -> list[DrawOutput]:
        """Make the draws context, prefill, decode every draw to its end; free the context.

        Raises:
            GenerationError: a draw asks for a grammar or logit adjustments (draws sample
                plain logits; such a generation runs alone).
        """
        if not draws:
            return []
        if any(d.constraint is not None or d.adjusts_logits for d in draws):
            raise GenerationError(
                "draws side by side take no grammar, logit bias or repetition penalty"
            )
        cells = draws_context_cells(len(prompt), [d.max_tokens for d in draws], self.h.n_ctx)
        ctx = _new_context(self.h.model, self.spec, n_seq=len(draws), cells=max(cells, 1))
        batch = VerifyBatch(max(len(draws), 1))
        try:
            return self._run(ctx, batch, prompt, draws, restore)
        finally:
            batch.close()
            llama_cpp.llama_free(ctx)

    def _run(
        self,
        ctx: Any,
        batch: VerifyBatch,
        prompt: list[int],
        draws: Sequence[SamplingParams],
        restore: PrefixState | None,
    ) -> list[DrawOutput]:
        restored = kv_state.restore(ctx, self.h.model, self.h.name, prompt, restore)
        ok = bool(prompt) and self._prefill(ctx, prompt[restored:], restored)
        prefilled = time.perf_counter()
        live = [
            _Draw(
                index=i, params=p, rng=np.random.default_rng(p.seed), pos=len(prompt),
                stream=StopStream(p.stop), first=prefilled, end=prefilled,
            )
            for i, p in enumerate(draws)
        ]  # fmt: skip
        if not ok:
            for d in live:
                d.reason = "context"
                self._finish(d, prompt, restored, prefilled)
            return self.finished
        for d in [d for d in live if d.params.max_tokens <= 0]:  # nothing to sample
            d.reason = "length"
            live.remove(d)
            self._finish(d, prompt, restored, prefilled)
        mem = llama_cpp.llama_get_memory(ctx)
        for d in live:
            if d.index != 0:
                llama_cpp.llama_memory_seq_cp(mem, 0, d.index, -1, -1)
        while live:
            if self.abort.is_set():
                raise Aborted
            if self.stop is not None and self.stop():
                break
            for d in live:
                self._step(ctx, d)
            for d in [d for d in live if d.reason is not None]:
                live.remove(d)
                llama_cpp.llama_memory_seq_rm(mem, d.index, -1, -1)
                self._finish(d, prompt, restored, prefilled)
            if live and not self._decode(ctx, batch, live):
                for d in live:
                    d.reason = "context"
                    d.pending = None
                    self._finish(d, prompt, restored, prefilled)
                live = []
        return self.finished

    def _prefill(self, ctx: Any, tokens: list[int], n_past: int) -> bool:
        """Evaluate ``tokens`` on sequence 0 in ``n_batch`` chunks, as a draw in turn does
        (the same chunks give the same KV values); False when the context is full."""
        h = self.h
        done = decode_chunks(
            ctx, tokens, n_past=n_past, n_batch=h.n_batch, n_ctx=h.n_ctx, abort=self.abort
        )
        return done is not None

    def _step(self, ctx: Any, d: _Draw) -> None:
        """Sample ``d``'s next token from its logits row and apply the stop rules of the
        decode loop in turn; sets ``d.reason`` when the draw ends, else ``d.pending``."""
        ptr = llama_cpp.llama_get_logits_ith(ctx, d.row)
        if not ptr:
            raise RuntimeError(f"llama_get_logits_ith({d.row}) returned no logits row")
        logits = np.ctypeslib.as_array(ptr, shape=(self.h.n_vocab,))
        token = sample_logits(logits, d.params, d.rng)
        now = time.perf_counter()
        if d.count == 0:
            d.first = now
        d.end = now
        if llama_cpp.llama_vocab_is_eog(self.h.vocab, token):
            d.reason = "eos"
            return
        d.count += 1
        d.stream.add(d.utf8.decode(piece(self.h.vocab, token)))
        if d.stream.stopped:
            d.reason = "stop"
            return
        if d.count >= d.params.max_tokens:
            d.reason = "length"
        elif d.pos + 1 > self.h.n_ctx:
            d.reason = "context"
        else:
            d.pending = token

    def _decode(self, ctx: Any, batch: VerifyBatch, live: list[_Draw]) -> bool:
        """One lockstep batch: each live draw's pending token on its own sequence; False
        when llama.cpp finds no room for it (status 1)."""
        rows = []
        for j, d in enumerate(live):
            assert d.pending is not None
            rows.append((d.pending, d.pos, d.index))
            d.row = j
        status = batch.decode_rows(ctx, rows)
        if status == 1:
            return False
        if status != 0:
            raise RuntimeError(f"llama_decode failed with status {status}")
        for d in live:
            assert d.pending is not None
            d.generated.append(d.pending)
            d.pos += 1
            d.pending = None
        return True

    def _finish(self, d: _Draw, prompt: list[int], restored: int, prefilled: float) -> None:
        """Close ``d``'s text as the loop in turn does, and hand it on."""
        if d.reason != "stop":
            d.stream.finish(d.utf8.decode(b"", final=True))
            if d.stream.stopped:
                d.reason = "stop"
        assert d.reason is not None
        stats = GenerationStats(
            prompt_tokens=len(prompt),
            kv_restored_tokens=restored,
            prefill_tokens=len(prompt) - restored,
            prefill_s=prefilled - self.started,
            ttft_s=d.first - self.started,
            tokens=d.count,
            gen_s=d.end - d.first,
            stop_reason=d.reason,
        )
        out = DrawOutput(
            index=d.index,
            output=GenerationOutput(text=d.stream.text, stats=stats, read=(*prompt, *d.generated)),
        )
        self.finished.append(out)
        if self.on_draw is not None:
            anyio.from_thread.run_sync(self.on_draw, out)


def _new_context(model: Any, spec: ModelSpec, *, n_seq: int, cells: int) -> Any:
    """A context on ``model`` for ``n_seq`` sequences sharing one KV cache of ``cells``
    cells (llama.cpp pads it up to 256), one logits row per sequence per batch.

    Raises:
        GenerationError: llama.cpp could not make it (out of memory, most likely).
    """
    threads = spec.threads
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = cells
    cparams.n_batch = cparams.n_ubatch = max(min(spec.n_batch, cells), n_seq)
    cparams.n_seq_max = n_seq
    cparams.n_outputs_max = n_seq
    cparams.kv_unified = True  # one cache: the prompt's cells are shared, not copied
    cparams.n_threads = cparams.n_threads_batch = threads
    cparams.type_k = KV_TYPES[spec.type_k][0]
    cparams.type_v = KV_TYPES[spec.type_v][0]
    cparams.no_perf = True
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    if not ctx:
        raise GenerationError(
            f"llama.cpp could not make a context of {cells} cells for {n_seq} draws of "
            f"model {spec.name!r}; draw fewer side by side or lower max_tokens"
        )
    return ctx
