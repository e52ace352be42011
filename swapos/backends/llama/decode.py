"""One generation's decode loop: restore, prefill in ``n_batch`` chunks, sample, stop.

The loop is a generator (:data:`~swapos.backends.llama.drive.Steps`): it asks its driver to
evaluate tokens of its sequence and samples from the logits it gets back, so one loop runs
alone on a model's own context (``drive.drive_alone``, in a worker thread that holds the
model's lock) or beside other generations of the model (the slot engine,
``backends/llama/slots.py``). It polls the abort flag between chunks and tokens, so a
cancellation stops it within one token (or one prefill chunk, or one verification batch).

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
from collections.abc import Callable, Generator

import llama_cpp
import msgspec
import numpy as np

from swapos.backends.base import GenerationOutput
from swapos.backends.llama import kv_state
from swapos.backends.llama.drive import NO_ROOM, Eval, Steps, drive_alone
from swapos.backends.llama.grammar import GrammarGate
from swapos.backends.llama.handles import Handles, logits_row
from swapos.backends.llama.runtime import Aborted
from swapos.backends.llama.sampling import adjust_logits, sample_logits
from swapos.backends.llama.vocab import piece, tokenize
from swapos.backends.stops import StopStream
from swapos.data.generation import GenerationStats, StopReason
from swapos.data.prefix import PrefixState
from swapos.data.sampling import SamplingParams
from swapos.policies.drafting import MAX_DRAFT, DraftPolicy, NgramIndex, lookup

Read = Generator[Eval, int, bool]
"""Evaluating tokens: yields the chunks, returns False when the context has no room."""


@dataclasses.dataclass
class _Drafts:
    """Drafting counters of one generation."""

    rule: str = ""
    drafted: int = 0
    accepted: int = 0
    steps: int = 0


class Decoder:
    """One generation (its steps run in the thread of its driver, which holds the model's
    lock). ``emit`` is called in that thread with each piece of text."""

    def __init__(
        self,
        handles: Handles,
        abort: threading.Event,
        emit: Callable[[str], None] | None,
        started: float,
    ) -> None:
        self.h = handles
        self.ctx = handles.ctx
        self.seq = handles.seq or 0
        self.abort = abort
        self.emit = emit
        self.started = started
        self.n_past = 0
        self.row = 0  # the batch index of the last logits row evaluated for this loop
        self.generated: list[int] = []  # sampled tokens decoded into the KV cache
        self.drafts = _Drafts()
        self.policy = DraftPolicy(None, None)
        self.sources: list[NgramIndex] = []  # prediction, then prompt + answer (the history)
        self.drafting = False
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
        """:meth:`steps` run alone on the context's one sequence (``drive.drive_alone``),
        in this thread, which must hold the model's lock."""
        steps = self.steps(prompt, params, restore, save_at, save_final=save_final)
        return drive_alone(steps, self.ctx)

    def steps(
        self,
        prompt: list[int],
        params: SamplingParams,
        restore: PrefixState | None,
        save_at: int | None,
        *,
        save_final: bool = False,
    ) -> Steps:
        """Restore, prefill (snapshotting at ``save_at``), sample until a stop (under
        ``params.constraint``'s grammar, if any), then snapshot the final state if
        ``save_final``; a driver evaluates what it yields.

        Raises:
            GenerationError: the constraint's grammar does not compile or reaches a dead end.
        """
        if params.constraint is not None:
            self.gate = GrammarGate(self.h.vocab, self.h.n_vocab, params.constraint)
        try:
            return (yield from self._run(prompt, params, restore, save_at, save_final=save_final))
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
    ) -> Steps:
        kv_state.clear(self.ctx, self.h.seq)
        restored = self.n_past = kv_state.restore(
            self.ctx, self.h.model, self.h.name, prompt, restore, seq=self.h.seq
        )
        saved: PrefixState | None = None
        if save_at is not None:
            save_at = min(save_at, len(prompt))
            if restore is not None and save_at == restored == len(restore.tokens):
                saved = restore
        ok = True
        if saved is None and save_at is not None and save_at > self.n_past:
            ok = yield from self._eval(prompt[self.n_past : save_at])
            if ok:
                saved = kv_state.snapshot(self.ctx, prompt[:save_at], self.seq)
        prompt_state: PrefixState | None = None
        held = len(prompt) - 1  # all but the last prompt token: a whole prefix of any retry
        windowed = self.h.window is not None
        if ok and save_final and windowed and held > max(self.n_past, save_at or 0):
            ok = yield from self._eval(prompt[self.n_past : held])
            if ok:
                prompt_state = kv_state.snapshot(self.ctx, prompt[:held], self.seq)
        ok = ok and (yield from self._eval(prompt[self.n_past :]))
        prefilled = time.perf_counter()
        if not ok or not prompt:
            return self._output(
                "", prompt, restored, prefilled=prefilled, first=prefilled, count=0,
                reason="context", saved=saved,
            )  # fmt: skip
        text, count, reason, first = yield from self._sample_loop(params, prompt)
        out = self._output(
            text, prompt, restored, prefilled=prefilled, first=first, count=count,
            reason=reason, saved=saved,
        )  # fmt: skip
        out = msgspec.structs.replace(
            out, read=(*prompt, *self.generated), prompt_state=prompt_state
        )
        if not save_final:
            return out
        final = yield from self._final_state(prompt)
        return msgspec.structs.replace(out, final=final) if final is not None else out

    def _eval(self, tokens: list[int], *, prefill: bool = True) -> Read:
        """Evaluate ``tokens`` in n_batch chunks (a prefill, or one token of a step), logits
        at the last; False when the context is full."""
        h = self.h
        for i in range(0, len(tokens), h.n_batch):
            if self.abort.is_set():
                raise Aborted
            chunk = tokens[i : i + h.n_batch]
            if self.n_past + len(chunk) > h.n_ctx:
                return False
            index = yield Eval(chunk, self.n_past, prefill=prefill)
            if index == NO_ROOM:
                return False
            self.n_past += len(chunk)
            self.row = index + len(chunk) - 1
        return True

    def _sample(self, params: SamplingParams, rng: np.random.Generator, row: int) -> int:
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
        if text and self.emit is not None:
            self.emit(text)

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
    ) -> Generator[Eval, int, tuple[str, int, StopReason, float]]:
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
        token = self._sample(params, rng, self.row)
        first = time.perf_counter()
        self.drafting = policy.active or self.drafter is not None
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
            queue = yield from self._step(queue[-1], params, rng)
            if not queue:
                reason = "context"
                break
        if reason == "stop":
            return stream.text, count, "stop", first
        self._emit(stream.finish(utf8.decode(b"", final=True)))
        return stream.text, count, "stop" if stream.stopped else reason, first

    def _step(
        self, token: int, params: SamplingParams, rng: np.random.Generator
    ) -> Generator[Eval, int, list[int]]:
        """Put ``token`` in the KV cache (with a verified draft when one pays) and sample
        what follows: the accepted drafted tokens (in the cache) and the model's own next
        token (not yet). Empty when the context is full."""
        policy, sources = self.policy, self.sources
        drafting = self.drafting and (self.h.beside is None or self.h.beside() == 0)
        draft = lookup(sources, sources[-1].tokens, policy.rule) if sources else []
        room = min(self.h.n_ctx - self.n_past - 1, MAX_DRAFT)
        d = min(policy.length(len(draft)), room) if draft and drafting else 0
        drafter = self.drafter if d <= 0 and drafting else None
        if drafter is not None:
            wanted = min(drafter.length(self.max_tokens - len(self.generated)), room)
            proposed = drafter.propose([*self.prompt, *self.generated, token], wanted)
            if proposed:
                draft, d = proposed, len(proposed)
            else:
                drafter = None
        if d <= 0:
            if not (yield from self._eval([token], prefill=False)):
                return []
            self.generated.append(token)
            nxt = self._sample(params, rng, self.row)
            if draft:
                policy.observe_unverified(draft[0], nxt)
            return [nxt]
        start = self.n_past
        index = yield Eval([token, *draft[:d]], start, every=True)
        if index == NO_ROOM:
            return []
        self.n_past += d + 1
        self.generated.append(token)
        out: list[int] = []
        for j in range(d + 1):
            sampled = self._sample(params, rng, index + j)
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
        if not kv_state.truncate(self.ctx, keep, self.seq):
            raise RuntimeError(f"llama.cpp refused to drop KV cells from position {keep}")
        self.n_past = keep

    def _final_state(self, prompt: list[int]) -> Generator[Eval, int, PrefixState | None]:
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
            if not kv_state.truncate(self.ctx, len(prompt), self.seq):
                return None
            self.n_past = len(prompt)
            if answer and not (yield from self._eval(answer)):
                return None
        return kv_state.snapshot(self.ctx, prompt + answer, self.seq)

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
