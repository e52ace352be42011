"""One generation's decode loop: restore, prefill in ``n_batch`` chunks, sample, stop.

It runs in a worker thread that holds the model's lock, and polls the abort flag between
chunks and tokens, so a cancellation stops it within one token (or one prefill chunk).
"""

from __future__ import annotations

import codecs
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio.from_thread
import llama_cpp
import msgspec
import numpy as np

from swapos.backends.base import GenerationOutput
from swapos.backends.llama import kv_state
from swapos.backends.llama.runtime import Aborted
from swapos.backends.llama.vocab import piece
from swapos.backends.stops import StopStream
from swapos.data.generation import GenerationStats, StopReason
from swapos.data.prefix import PrefixState
from swapos.data.sampling import SamplingParams


@dataclasses.dataclass(frozen=True)
class Handles:
    """The llama.cpp objects (and their sizes) a generation runs on."""

    name: str
    model: Any
    ctx: Any
    vocab: Any
    n_vocab: int
    n_ctx: int
    n_batch: int
    window: int | None = None
    """The sliding attention window (``n_swa``), None with full attention."""


class Decoder:
    """One generation (runs in the worker thread, holding the model lock)."""

    def __init__(
        self,
        handles: Handles,
        abort: threading.Event,
        on_token: Callable[[str], None] | None,
        started: float,
    ) -> None:
        self.h = handles
        self.ctx = handles.ctx
        self.abort = abort
        self.on_token = on_token
        self.started = started
        self.n_past = 0
        self.generated: list[int] = []  # sampled tokens decoded into the KV cache

    def run(
        self,
        prompt: list[int],
        params: SamplingParams,
        restore: PrefixState | None,
        save_at: int | None,
        *,
        save_final: bool = False,
    ) -> GenerationOutput:
        """Restore, prefill (snapshotting at ``save_at``), sample until a stop, then
        snapshot the final state if ``save_final``."""
        kv_state.clear(self.ctx)
        restored = self.n_past = kv_state.restore(
            self.ctx, self.h.model, self.h.name, prompt, restore
        )
        saved: PrefixState | None = None
        if save_at is not None:
            save_at = min(save_at, len(prompt))
            if restore is not None and save_at == restored == len(restore.tokens):
                saved = restore
        ok = True
        if saved is None and save_at is not None and save_at > self.n_past:
            ok = self._eval(prompt[self.n_past : save_at])
            if ok:
                saved = kv_state.snapshot(self.ctx, prompt[:save_at])
        prompt_state: PrefixState | None = None
        held = len(prompt) - 1  # all but the last prompt token: a whole prefix of any retry
        windowed = self.h.window is not None
        if ok and save_final and windowed and held > max(self.n_past, save_at or 0):
            ok = self._eval(prompt[self.n_past : held])
            if ok:
                prompt_state = kv_state.snapshot(self.ctx, prompt[:held])
        ok = ok and self._eval(prompt[self.n_past :])
        prefilled = time.perf_counter()
        if not ok or not prompt:
            return self._output(
                "", prompt, restored, prefilled=prefilled, first=prefilled, count=0,
                reason="context", saved=saved,
            )  # fmt: skip
        text, count, reason, first = self._sample_loop(params)
        out = self._output(
            text, prompt, restored, prefilled=prefilled, first=first, count=count,
            reason=reason, saved=saved,
        )  # fmt: skip
        out = msgspec.structs.replace(
            out, read=(*prompt, *self.generated), prompt_state=prompt_state
        )
        if not save_final:
            return out
        final = self._final_state(prompt)
        return msgspec.structs.replace(out, final=final) if final is not None else out

    def _eval(self, tokens: list[int]) -> bool:
        """Evaluate ``tokens`` in n_batch chunks; False when the context is full."""
        step = self.h.n_batch
        for i in range(0, len(tokens), step):
            if self.abort.is_set():
                raise Aborted
            chunk = tokens[i : i + step]
            if self.n_past + len(chunk) > self.h.n_ctx:
                return False
            arr = (llama_cpp.llama_token * len(chunk))(*chunk)
            status = llama_cpp.llama_decode(
                self.ctx, llama_cpp.llama_batch_get_one(arr, len(chunk))
            )
            if status != 0:
                if status == 1:
                    return False
                raise RuntimeError(f"llama_decode failed with status {status}")
            self.n_past += len(chunk)
        return True

    def _sample(self, params: SamplingParams, rng: np.random.Generator) -> int:
        ptr = llama_cpp.llama_get_logits_ith(self.ctx, -1)
        logits = np.ctypeslib.as_array(ptr, shape=(self.h.n_vocab,))
        if params.temperature <= 0.0:
            return int(np.argmax(logits))
        scaled = logits.astype(np.float64) / params.temperature
        k = params.top_k if 0 < params.top_k < scaled.size else scaled.size
        ids = np.argpartition(-scaled, k - 1)[:k] if k < scaled.size else np.arange(scaled.size)
        ids = ids[np.argsort(-scaled[ids])]
        probs = np.exp(scaled[ids] - scaled[ids[0]])
        probs /= probs.sum()
        if params.top_p < 1.0:
            keep = int(np.searchsorted(np.cumsum(probs), params.top_p)) + 1
            ids, probs = ids[:keep], probs[:keep] / probs[:keep].sum()
        return int(ids[rng.choice(len(ids), p=probs)])

    def _emit(self, text: str) -> None:
        if text and self.on_token is not None:
            anyio.from_thread.run_sync(self.on_token, text)

    def _sample_loop(self, params: SamplingParams) -> tuple[str, int, StopReason, float]:
        rng = np.random.default_rng(params.seed)
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        stream = StopStream(params.stop)
        count = 0
        first = time.perf_counter()
        reason: StopReason = "length"
        for i in range(params.max_tokens):
            if self.abort.is_set():
                raise Aborted
            token = self._sample(params, rng)
            if i == 0:
                first = time.perf_counter()
            if llama_cpp.llama_vocab_is_eog(self.h.vocab, token):
                reason = "eos"
                break
            count += 1
            self._emit(stream.add(utf8.decode(piece(self.h.vocab, token))))
            if stream.stopped:
                return stream.text, count, "stop", first
            if i + 1 < params.max_tokens:
                if not self._eval([token]):
                    reason = "context"
                    break
                self.generated.append(token)
        self._emit(stream.finish(utf8.decode(b"", final=True)))
        return stream.text, count, "stop" if stream.stopped else reason, first

    def _final_state(self, prompt: list[int]) -> PrefixState | None:
        """The state holding ``prompt`` + the answer's decoded tokens, for a retry whose
        prompt appends to them.

        The answer's KV cells were computed one token at a time, and llama.cpp's CPU
        kernels are not batch-invariant: a later *prefill* of the same tokens gives slightly
        different values, enough to flip a greedy choice further on. So the answer is
        re-evaluated as one batch (at most ``max_tokens`` tokens, after the last token was
        emitted) before the snapshot: restoring it then matches a fresh prefill exactly.
        A one-token answer is left out (a batch of one is the decode path again).
        """
        assert self.n_past == len(prompt) + len(self.generated), "KV cache and tokens disagree"
        answer = self.generated if len(self.generated) > 1 else []
        if self.generated:
            if not kv_state.truncate(self.ctx, len(prompt)):
                return None
            self.n_past = len(prompt)
            if answer and not self._eval(answer):
                return None
        return kv_state.snapshot(self.ctx, prompt + answer)

    def _output(
        self,
        text: str,
        prompt: list[int],
        restored: int,
        *,
        prefilled: float,
        first: float,
        count: int,
        reason: StopReason,
        saved: PrefixState | None,
    ) -> GenerationOutput:
        end = time.perf_counter()
        stats = GenerationStats(
            prompt_tokens=len(prompt),
            kv_restored_tokens=restored,
            prefill_tokens=len(prompt) - restored,
            prefill_s=prefilled - self.started,
            ttft_s=first - self.started,
            tokens=count,
            gen_s=end - first,
            stop_reason=reason,
        )
        return GenerationOutput(text=text, stats=stats, saved=saved)
