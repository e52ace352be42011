"""A model resident in llama.cpp: tokenize, generate and close, each in a worker thread."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
import llama_cpp
import structlog

from swapos.backends.base import DrawOutput, GenerationOutput
from swapos.backends.errors import LIBRARY_ERRORS, map_exceptions
from swapos.backends.llama.decode import Decoder
from swapos.backends.llama.draft_costs import costs_for
from swapos.backends.llama.drafters import DraftChoice
from swapos.backends.llama.drive import Steps
from swapos.backends.llama.handles import Handles
from swapos.backends.llama.parallel import DrawsDecoder
from swapos.backends.llama.runtime import Aborted, acquire_unless_aborted
from swapos.backends.llama.slots import SlotEngine, SlotJob, context_batch
from swapos.backends.llama.vocab import tokenize
from swapos.backends.threads import on_event_loop, run_in_worker
from swapos.data.generation import DraftCosts
from swapos.data.prefix import PrefixState
from swapos.data.residency import Offload
from swapos.data.sampling import SamplingParams
from swapos.errors import GenerationError
from swapos.models.spec import ModelSpec
from swapos.policies.draws import curve_from_ratios
from swapos.policies.slots import step_width
from swapos.sysinfo import release_free_heap

log = structlog.get_logger(__name__)

T = TypeVar("T")


class LlamaModel:
    """A model resident in llama.cpp (implements ``LoadedModel``): one context.

    With one slot (``spec.slots``) the context holds one sequence and generations on the
    model are serialized by a lock (each waits for the previous one, still honouring
    cancellation while it waits). With more, they run side by side, one sequence each
    (:mod:`~swapos.backends.llama.slots`).

    Args:
        spec: what it was loaded from.
        model, ctx: the llama.cpp model and context (this object frees them).
        footprint: memory it holds, measured across the load.
        identity: its :attr:`kv_identity`.
        limiter: bounds concurrent generations (and tokenizations).
        offload: where its offloaded layers went (None: all on the host).
        token_table: the digest of its GGUF token table (``GGUFInfo.token_table_digest``).
        peers: the models resident beside it, which may draft for it
            (``policies/model_drafts.py``); None: it never borrows one.
    """

    def __init__(
        self,
        spec: ModelSpec,
        model: Any,
        ctx: Any,
        *,
        footprint: int,
        identity: str,
        limiter: anyio.CapacityLimiter | None = None,
        offload: Offload | None = None,
        token_table: str = "",
        peers: Callable[[], Iterable[LlamaModel]] | None = None,
    ) -> None:
        self._spec = spec
        self._offload = offload
        self._model: Any = model
        self._ctx: Any = ctx
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self._n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        slots = max(spec.slots, 1)
        self._n_ctx = min(int(llama_cpp.llama_n_ctx(ctx)) // slots, spec.n_ctx)  # padded
        self._limiter = limiter
        self._lock = threading.Lock()
        self._footprint = footprint
        self._identity = identity
        n_swa = int(llama_cpp.llama_model_n_swa(model))
        self._window = n_swa if n_swa > 0 else None
        self._draft_costs = costs_for(spec)  # bench decode's measurements, or a profile's pin
        self._token_table = token_table
        self._uses = 0  # generations run on its context (a drafter's cells go stale)
        self._lent = 0  # times lent as a draft model
        self._measured = (-1, -1)  # (uses, lent) after the last measure_idle step
        self._drafters = DraftChoice(
            self, spec.name, token_table=token_table, costs=self._draft_costs,
            window=self._window, peers=peers,
        )  # fmt: skip
        costs = self._draft_costs
        curve = curve_from_ratios(costs.verify_ratio) if costs is not None else {}
        self._engine = None
        if slots > 1:
            self._engine = SlotEngine(
                name=spec.name, slots=slots, lock=self._lock, context=lambda: self._ctx,
                width=functools.partial(step_width, curve), capacity=context_batch(spec),
            )  # fmt: skip

    @property
    def spec(self) -> ModelSpec:
        """The spec it was loaded from."""
        return self._spec

    @property
    def footprint_bytes(self) -> int:
        """RSS delta measured across the load, floored by the estimate (mmap'd weights
        are only resident once the first eval touches them)."""
        return self._footprint

    @property
    def offload(self) -> Offload | None:
        """Its layers on a GPU as llama.cpp placed them, the device memory they took and
        the upload time; None when it was loaded with ``gpu_layers = 0``."""
        return self._offload

    @property
    def kv_identity(self) -> str:
        """File sha256 + size + mtime, ``n_ctx``, KV types, ``n_gpu_layers`` and the
        llama-cpp-python version."""
        return self._identity

    @property
    def kv_window(self) -> int | None:
        """llama.cpp's ``n_swa`` when the model has sliding-window layers, else None."""
        return self._window

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has freed the model."""
        return self._model is None

    async def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Token ids of ``text``, with the BOS token (in a worker thread); ``special`` parses
        special-token text into special tokens (chat prompts)."""
        return await anyio.to_thread.run_sync(
            functools.partial(self.tokenize_sync, text, special=special), limiter=self._limiter
        )

    def tokenize_sync(self, text: str, *, special: bool = False) -> list[int]:
        """Blocking :meth:`tokenize`.

        Raises:
            GenerationError: llama.cpp failed to tokenize (the message says why).
        """
        with self._edge("tokenizing for"):
            return tokenize(self._vocab, text, special=special)

    async def generate(
        self,
        prompt: list[int],
        params: SamplingParams,
        *,
        restore: PrefixState | None = None,
        save_at: int | None = None,
        save_final: bool = False,
        on_token: Callable[[str], None] | None = None,
    ) -> GenerationOutput:
        """Generate a continuation of ``prompt`` in one worker thread.

        See ``LoadedModel.generate``. On cancellation the decode loop stops within one token
        (or one ``n_batch`` chunk of prefill), the model stays usable, and the cancellation
        is re-raised.

        Raises:
            GenerationError: llama.cpp failed (a ``llama_decode`` error, a failed state
                save or restore, the model was closed); the model stays loaded and the
                next generation starts from an empty KV cache.
        """
        started = time.perf_counter()

        def work(abort: threading.Event) -> GenerationOutput:
            if self._engine is not None:
                decode = functools.partial(
                    Decoder.steps, prompt=prompt, params=params, restore=restore,
                    save_at=save_at, save_final=save_final,
                )  # fmt: skip
                return self._in_slot(
                    self._engine, decode, params=params, prompt_tokens=len(prompt), abort=abort,
                    on_token=on_token,
                )  # fmt: skip
            if not acquire_unless_aborted(self._lock, abort):
                raise Aborted
            try:
                if self._ctx is None:
                    raise GenerationError(f"model {self._spec.name!r} is closed; load it again")
                self._uses += 1
                drafter = self._drafters.choose(params, len(prompt), abort)
                handles = dataclasses.replace(self._handles(), drafter=drafter)
                decoder = Decoder(handles, abort, on_event_loop(on_token), started)
                try:
                    with self._edge("generating with"):
                        return decoder.run(prompt, params, restore, save_at, save_final=save_final)
                finally:
                    if drafter is not None:
                        self._drafters.record(drafter)
            finally:
                self._lock.release()

        return await run_in_worker(work, limiter=self._limiter)

    async def generate_draws(
        self,
        prompt: list[int],
        draws: Sequence[SamplingParams],
        *,
        restore: PrefixState | None = None,
        on_draw: Callable[[DrawOutput], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> list[DrawOutput]:
        """Decode ``draws`` side by side in one worker thread (``DrawsModel.generate_draws``;
        :mod:`~swapos.backends.llama.parallel` says how and what memory it takes).

        On cancellation the loop stops within one step, the draws context is freed, the
        model stays usable, and the cancellation is re-raised.

        Raises:
            GenerationError: llama.cpp failed (no room for the draws context, a
                ``llama_decode`` error, the model was closed); the model stays loaded.
        """
        started = time.perf_counter()

        def work(abort: threading.Event) -> list[DrawOutput]:
            if not acquire_unless_aborted(self._lock, abort):
                raise Aborted
            try:
                if self._ctx is None:
                    raise GenerationError(f"model {self._spec.name!r} is closed; load it again")
                self._uses += 1
                decoder = DrawsDecoder(
                    self._handles(), self._spec, abort, on_draw=on_draw, stop=stop,
                    started=started,
                )  # fmt: skip
                with self._edge("drawing side by side with"):
                    return decoder.run(prompt, draws, restore)
            finally:
                self._lock.release()

        return await run_in_worker(work, limiter=self._limiter)

    def _in_slot(
        self,
        engine: SlotEngine,
        decode: Callable[[Decoder], Steps],
        *,
        params: SamplingParams,
        prompt_tokens: int,
        abort: threading.Event,
        on_token: Callable[[str], None] | None,
    ) -> GenerationOutput:
        """Hand a generation to the slot engine and relay its pieces until it ends."""
        started = time.perf_counter()
        if self._ctx is None:
            raise GenerationError(f"model {self._spec.name!r} is closed; load it again")
        drafter = self._drafters.choose(params, prompt_tokens, abort)

        def start(seq: int) -> Steps:
            handles = dataclasses.replace(
                self._handles(), drafter=drafter, seq=seq, beside=engine.beside
            )
            return decode(Decoder(handles, abort, job.emit, started))

        job = SlotJob(start, abort)
        engine.submit(job)
        try:
            with self._edge("generating with"):
                return job.wait(on_event_loop(on_token), engine.alive)
        finally:
            if drafter is not None:
                self._drafters.record(drafter)

    @property
    def slots(self) -> int:
        """Generations it runs side by side (its context's sequences)."""
        return max(self._spec.slots, 1)

    def with_handles(self, work: Callable[[Handles], T]) -> T:
        """Run ``work`` on the model's llama.cpp handles under its lock, in this (worker)
        thread: for benchmarks that drive llama.cpp directly (``bench decode``).

        Raises:
            GenerationError: the model is closed, or has slots (its context's sequences
                are its generations').
        """
        if self._engine is not None:
            raise GenerationError(f"model {self._spec.name!r} has slots; load it with one")
        with self._lock:
            if self._ctx is None:
                raise GenerationError(f"model {self._spec.name!r} is closed; load it again")
            self._uses += 1
            return work(self._handles())

    @property
    def name(self) -> str:
        """Its spec's name."""
        return self._spec.name

    @property
    def token_table(self) -> str:
        """The digest of its GGUF token table ("" when unknown)."""
        return self._token_table

    @property
    def draft_costs(self) -> DraftCosts | None:
        """Its measured drafting costs (``backends/llama/draft_costs.py``), None if none."""
        return self._draft_costs

    @contextlib.contextmanager
    def lend(self) -> Iterator[tuple[Handles, int] | None]:
        """Its handles and use count under its lock, if the lock is free now and it is not
        closed (``model_draft.Lender``: a draft model is borrowed, never waited for); never
        a model with slots (its sequences are its generations')."""
        if self._engine is not None or not self._lock.acquire(blocking=False):
            yield None
            return
        try:
            self._lent += 1
            yield None if self._ctx is None else (self._handles(), self._uses)
        finally:
            self._lock.release()

    def measure_idle(self, step: Callable[[Handles, bool], bool]) -> bool:
        """Run ``step(handles, used)`` under the lock if it is free now, never on a model with
        slots (the background measurement, :mod:`~swapos.backends.llama.calibration`);
        ``used``: something else used the context since the last such step; ``step`` returns
        whether it changed the context's cells. Whether ``step`` ran."""
        if self._engine is not None or not self._lock.acquire(blocking=False):
            return False
        try:
            if self._ctx is None:
                return False
            used = (self._uses, self._lent) != self._measured
            if step(self._handles(), used):
                self._uses += 1  # a lender's draft cache starts again
            self._measured = (self._uses, self._lent)
            return True
        finally:
            self._lock.release()

    def adopt_costs(self, costs: DraftCosts) -> None:
        """Draft from now on with ``costs`` (measured while it was loaded)."""
        with self._lock:
            self._draft_costs = costs
            self._drafters.costs = costs

    def _edge(self, doing: str) -> contextlib.AbstractContextManager[None]:
        """Maps llama.cpp's exceptions to :class:`GenerationError` naming this model."""
        return map_exceptions(
            {LIBRARY_ERRORS: GenerationError},
            f"{doing} model {self._spec.name!r}",
            advice="the model stays loaded; retry the phase, or lower n_batch or n_ctx if it "
            "keeps failing",
        )

    def _handles(self) -> Handles:
        return Handles(
            name=self._spec.name, model=self._model, ctx=self._ctx, vocab=self._vocab,
            n_vocab=self._n_vocab, n_ctx=self._n_ctx, n_batch=self._spec.n_batch,
            window=self._window, draft_costs=self._draft_costs,
        )  # fmt: skip

    async def close(self) -> None:
        """Free the model and its context in a worker thread. Idempotent.

        Waits for a running generation to finish first. Runs shielded: a cancelled caller
        still leaves the model freed. Errors are not mapped: llama.cpp's free functions
        cannot fail, so an exception here is a bug, and memory the budget counts as freed
        might not be; it propagates.
        """
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.close_sync)

    def close_sync(self) -> None:
        """Blocking :meth:`close`; with slots, the generations still running end first
        (``GenerationError``: closed)."""
        if self._engine is not None:
            self._engine.close()
        with self._lock:
            if self._ctx is not None:
                llama_cpp.llama_free(self._ctx)
                self._ctx = None
            if self._model is not None:
                llama_cpp.llama_model_free(self._model)
                self._model = None
                release_free_heap()
                log.info("model_close.done", model=self._spec.name)
