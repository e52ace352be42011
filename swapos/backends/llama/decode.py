"""One generation's decode loop: restore, prefill in ``n_batch`` chunks, sample, stop.

It runs in a worker thread that holds the model's lock, and polls the abort flag between
chunks and tokens, so a cancellation stops it within one token (or one prefill chunk, or
one verification batch).

With drafting (``policies/drafting.py`` decides; the model's measured costs say whether it
pays) a step evaluates the next token and a looked-up draft in one batch with logits at each
position (or, where the lookup has none, a draft proposed by a smaller resident model:
``backends/llama/model_draft.py``, chosen by ``policies/model_drafts.py``), samples position
after position while the sampled token equals the drafted one, and drops the KV cells of
the rejected rest. Each emitted token is sampled from the model
with the same random draw as plain decoding would use, so the output (greedy or sampled) is
what plain decoding gives, up to the batch's numerics.
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
from swapos.backends.llama.batch import VerifyBatch, decode_chunks
from swapos.backends.llama.grammar import GrammarGate
from swapos.backends.llama.model_draft import ModelDrafter
from swapos.backends.llama.runtime import Aborted
from swapos.backends.llama.sampling import adjust_logits, sample_logits
from swapos.backends.llama.vocab import piece, tokenize
from swapos.backends.stops import StopStream
from swapos.data.generation import DraftCosts, GenerationStats, StopReason
from swapos.data.prefix import PrefixState
from swapos.data.sampling import SamplingParams
from swapos.policies.drafting import MAX_DRAFT, DraftPolicy, NgramIndex, lookup


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
    draft_costs: DraftCosts | None = None
    """The model's measured drafting costs (None: never draft unless a request pins it)."""
    drafter: ModelDrafter | None = None
    """A smaller resident model that drafts where the lookup finds nothing (None: none)."""


@dataclasses.dataclass
class _Drafts:
    """Drafting counters of one generation."""

    rule: str = ""
    drafted: int = 0
    accepted: int = 0
    steps: int = 0


def logits_row(ctx: Any, n_vocab: int, row: int = -1) -> np.ndarray:
    """The logits of output ``row`` of the last batch (-1: its last), as a view."""
    ptr = llama_cpp.llama_get_logits_ith(ctx, row)
    return np.ctypeslib.as_array(ptr, shape=(n_vocab,))


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
        self.drafts = _Drafts()
        self.policy = DraftPolicy(None, None)
        self.sources: list[NgramIndex] = []  # prediction, then prompt + answer (the history)
        self.batch: VerifyBatch | None = None
        self.drafter = handles.drafter if handles.window is None else None
        self.prompt: list[int] = []
        self.max_tokens = 0
        self.gate: GrammarGate | None = None

    def run(
        self,
        prompt: list[int],
        params: SamplingParams,
        restore: PrefixState | None,
        save_at: int | None,
        *,
        save_final: bool = False,
    ) -> GenerationOutput:
        """Restore, prefill (snapshotting at ``save_at``), sample until a stop (under
        ``params.constraint``'s grammar, if any), then snapshot the final state if
        ``save_final``.

        Raises:
            GenerationError: the constraint's grammar does not compile or reaches a dead end.
        """
        if params.constraint is not None:
            self.gate = GrammarGate(self.h.vocab, self.h.n_vocab, params.constraint)
        try:
            return self._run(prompt, params, restore, save_at, save_final=save_final)
        finally:
            if self.gate is not None:
                self.gate.close()

    def _run(
        self,
        prompt: list[int],
        params: SamplingParams,
        restore: PrefixState | None,
        save_at: int | None,
        *,
        save_final: bool,
    ) -> GenerationOutput:
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
        text, count, reason, first = self._sample_loop(params, prompt)
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
        h = self.h
        n_past = decode_chunks(
            self.ctx, tokens, n_past=self.n_past, n_batch=h.n_batch, n_ctx=h.n_ctx, abort=self.abort
        )
        if n_past is None:
            return False
        self.n_past = n_past
        return True

    def _sample(self, params: SamplingParams, rng: np.random.Generator, row: int = -1) -> int:
        """The next token from output ``row``'s logits: biased and penalised over the prompt
        and answer so far, sampled, then (under a grammar) checked alone and, if the grammar
        rejects it, sampled again from the logits the grammar allows."""
        logits = logits_row(self.ctx, self.h.n_vocab, row)
        if params.adjusts_logits:
            logits = adjust_logits(logits, params, [*self.prompt, *self.generated])
        token = sample_logits(logits, params, rng)
        gate = self.gate
        if gate is not None:
            if not gate.allows(token):
                token = sample_logits(gate.mask(logits), params, rng)
            gate.accept(token)
        return token

    def _emit(self, text: str) -> None:
        if text and self.on_token is not None:
            anyio.from_thread.run_sync(self.on_token, text)

    def _policy(
        self, params: SamplingParams, prompt: list[int]
    ) -> tuple[DraftPolicy, list[NgramIndex]]:
        """The drafting policy and the sources it looks drafts up in (prediction first).
        A constrained or penalised generation does not draft: its grammar and penalties
        follow the tokens one at a time."""
        if params.constraint is not None or params.adjusts_logits:
            self.drafter = None
            return DraftPolicy(None, None), []
        if self.h.window is not None:  # a rolled-back step may have pushed cells out of it
            return DraftPolicy(None, None), []
        if self.drafter is not None:
            self.drafts.rule = f"model:{self.drafter.name}"
        policy = DraftPolicy(self.h.draft_costs, params.draft)
        sources: list[NgramIndex] = []
        if not policy.active:
            return policy, sources
        n = policy.rule.ngram_max
        prediction = params.draft.prediction if params.draft is not None else ""
        if prediction:
            tokens = tokenize(self.h.vocab, prediction)
            bos = llama_cpp.llama_vocab_bos(self.h.vocab)
            sources.append(NgramIndex(tokens[1:] if tokens[:1] == [bos] else tokens, ngram_max=n))
            rule = f"{policy.rule.name}+prediction"
        else:
            rule = policy.rule.name
        self.drafts.rule = f"{rule}+{self.drafts.rule}" if self.drafts.rule else rule
        sources.append(NgramIndex(prompt, ngram_max=n))
        return policy, sources

    def _sample_loop(
        self, params: SamplingParams, prompt: list[int]
    ) -> tuple[str, int, StopReason, float]:
        if params.max_tokens <= 0:
            return "", 0, "length", time.perf_counter()
        rng = np.random.default_rng(params.seed)
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        stream = StopStream(params.stop)
        policy, sources = self._policy(params, prompt)
        self.policy, self.sources = policy, sources
        self.prompt, self.max_tokens = prompt, params.max_tokens
        history = sources[-1] if sources else None
        count = 0
        reason: StopReason = "length"
        token = self._sample(params, rng)
        first = time.perf_counter()
        drafting = policy.active or self.drafter is not None
        batch = self.batch = VerifyBatch(MAX_DRAFT + 1) if drafting else None
        try:
            queue = [token]  # sampled, not yet emitted; all but the last are in the KV cache
            while True:
                if self.abort.is_set():
                    raise Aborted
                ended: StopReason | None = None
                for j, tok in enumerate(queue):
                    if llama_cpp.llama_vocab_is_eog(self.h.vocab, tok):
                        ended = "eos"
                    else:
                        count += 1
                        self._emit(stream.add(utf8.decode(piece(self.h.vocab, tok))))
                        ended = "stop" if stream.stopped else None
                        if ended is None and count >= params.max_tokens:
                            ended = "length"
                    if ended is not None:
                        self._keep(len(queue) - 1 - j)  # tok and what followed leave the KV
                        break
                    if j < len(queue) - 1:
                        self.generated.append(tok)
                        self.drafts.accepted += 1
                    if history is not None:
                        history.append(tok)
                if ended is not None:
                    reason = ended
                    break
                queue = self._step(queue[-1], params, rng)
                if not queue:
                    reason = "context"
                    break
        finally:
            if batch is not None:
                batch.close()
        if reason == "stop":
            return stream.text, count, "stop", first
        self._emit(stream.finish(utf8.decode(b"", final=True)))
        return stream.text, count, "stop" if stream.stopped else reason, first

    def _step(self, token: int, params: SamplingParams, rng: np.random.Generator) -> list[int]:
        """Put ``token`` in the KV cache (with a verified draft when one pays) and sample
        what follows: the accepted drafted tokens (in the cache) and the model's own next
        token (not yet). Empty when the context is full."""
        policy, sources, batch = self.policy, self.sources, self.batch
        draft = lookup(sources, sources[-1].tokens, policy.rule) if sources else []
        room = min(self.h.n_ctx - self.n_past - 1, MAX_DRAFT)
        d = min(policy.length(len(draft)), room) if draft else 0
        drafter = self.drafter if d <= 0 and batch is not None else None
        if drafter is not None:
            wanted = min(drafter.length(self.max_tokens - len(self.generated)), room)
            proposed = drafter.propose([*self.prompt, *self.generated, token], wanted)
            if proposed:
                draft, d = proposed, len(proposed)
            else:
                drafter = None
        if d <= 0 or batch is None:
            if not self._eval([token]):
                return []
            self.generated.append(token)
            nxt = self._sample(params, rng)
            if draft:
                policy.observe_unverified(draft[0], nxt)
            return [nxt]
        start = self.n_past
        status = batch.decode(self.ctx, [token, *draft[:d]], start)
        if status == 1:
            return []
        if status != 0:
            raise RuntimeError(f"llama_decode failed with status {status}")
        self.n_past += d + 1
        self.generated.append(token)
        out: list[int] = []
        for j in range(d + 1):
            sampled = self._sample(params, rng, j)
            out.append(sampled)
            if j == d or sampled != draft[j]:
                break
        accepted = len(out) - 1
        (drafter or policy).observe(d, accepted)
        self.drafts.drafted += d
        self.drafts.steps += 1
        self._keep(d - accepted)
        return out

    def _keep(self, drop: int) -> None:
        """Drop the last ``drop`` cells of the KV cache (rejected or never emitted)."""
        if drop <= 0:
            return
        keep = self.n_past - drop
        if not kv_state.truncate(self.ctx, keep):
            raise RuntimeError(f"llama.cpp refused to drop KV cells from position {keep}")
        self.n_past = keep

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
            draft_rule=self.drafts.rule,
            drafted_tokens=self.drafts.drafted,
            accepted_tokens=self.drafts.accepted,
            verify_steps=self.drafts.steps,
        )
        return GenerationOutput(text=text, stats=stats, saved=saved)
