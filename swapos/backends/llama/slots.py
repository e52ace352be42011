"""Slots: a model's generations side by side, as sequences of its one llama.cpp context.

A model loaded with ``spec.slots = N > 1`` has one context for N sequences
(``backends/llama/loading.py``: ``n_seq_max = N``, ``n_ctx`` cells per sequence, a KV cache
of N streams, so each sequence attends to its own cells only). A :class:`SlotEngine` owns
the sequences and runs, in one thread of its own (a llama.cpp context is not thread-safe),
every generation of the model as a decode loop on a sequence of its own
(:class:`~swapos.backends.llama.decode.Decoder`: the same loop a generation alone runs,
with its own sampling, grammar, penalties, stops, KV prefix restore and final snapshot).
Callers hand it a :class:`SlotJob` and wait in their own worker thread, relaying the text
pieces to the event loop.

While it has work the engine repeats one iteration, holding the model's lock:

1. a job whose abort flag is set leaves (waiting, or running: its loop is closed and its
   sequence's cells dropped), and jobs waiting take the free sequences in the order they
   came (their loops start: the KV prefix is restored into their sequence here);
2. one chunk of a prompt is prefilled: the oldest loop asking for one, alone in its batch
   (so its KV values are what the same chunk alone computes);
3. one step: the pending token of the loops decoding (or a verification batch: a loop
   drafts only when no other generation shares the context), as many of them as the cost
   curve pays for (``policies/slots.step_width``), oldest first, in one batch (each token
   at its loop's position on its loop's sequence, logits on);
4. each loop whose tokens were decoded samples from its own rows and asks for its next.

So a request joining mid-decode costs the running ones one prefill chunk per step, and a
finished, failed or cancelled loop gives its sequence back at once (``llama_memory_seq_rm``:
its cells are free for the next job).
"""

from __future__ import annotations

import collections
import dataclasses
import queue
import threading
from collections.abc import Callable
from typing import Any

import structlog

from swapos.backends.base import GenerationOutput
from swapos.backends.llama import kv_state
from swapos.backends.llama.batch import VerifyBatch
from swapos.backends.llama.drive import NO_ROOM, Eval, Steps
from swapos.backends.llama.runtime import Aborted
from swapos.errors import GenerationError
from swapos.models.spec import ModelSpec
from swapos.policies.drafting import MAX_DRAFT

log = structlog.get_logger(__name__)

POLL_S = 0.1
"""How often a waiting caller checks that the engine still runs."""


def context_batch(spec: ModelSpec) -> int:
    """The context's ``n_batch`` (and ``n_ubatch``): the spec's, bounded by ``n_ctx``; with
    slots, at least a token of each sequence beside one verification batch."""
    n = min(spec.n_batch, spec.n_ctx)
    return max(n, spec.slots + MAX_DRAFT) if spec.slots > 1 else n


@dataclasses.dataclass(frozen=True)
class _End:
    output: GenerationOutput | None = None
    error: BaseException | None = None


class SlotJob:
    """One generation handed to a :class:`SlotEngine`.

    Args:
        start: makes the generation's decode loop on a sequence (called in the engine's
            thread once a sequence is free).
        abort: set by the caller to cancel it (the engine drops it at its next iteration).
    """

    def __init__(self, start: Callable[[int], Steps], abort: threading.Event) -> None:
        self.start = start
        self.abort = abort
        self._out: queue.SimpleQueue[str | _End] = queue.SimpleQueue()

    def emit(self, text: str) -> None:
        """A piece of text (the engine's thread)."""
        self._out.put(text)

    def end(
        self, output: GenerationOutput | None = None, error: BaseException | None = None
    ) -> None:
        """Its output, or why it ended without one (the engine's thread)."""
        self._out.put(_End(output, error))

    def wait(
        self, relay: Callable[[str], None] | None, alive: Callable[[], bool]
    ) -> GenerationOutput:
        """Relay its pieces until it ends (the caller's worker thread); its output. A relay
        that fails (the event loop is gone) cancels the job, waits for its end, and raises.

        Raises:
            Aborted: it was cancelled.
            GenerationError: the engine stopped without ending it (a bug).
            Whatever its loop or ``relay`` raised.
        """
        failed: BaseException | None = None
        while True:
            try:
                item = self._out.get(timeout=POLL_S)
            except queue.Empty:
                if not alive() and self._out.empty():
                    raise GenerationError("the slot engine stopped; retry the request") from None
                continue
            if isinstance(item, str):
                if relay is not None and failed is None:
                    try:
                        relay(item)
                    except BaseException as exc:  # re-raised once the engine let it go
                        failed = exc
                        self.abort.set()
                continue
            if failed is not None:
                raise failed
            if item.error is not None:
                raise item.error
            assert item.output is not None
            return item.output


@dataclasses.dataclass(eq=False)
class _Slot:
    job: SlotJob
    seq: int
    steps: Steps | None = None
    want: Eval | None = None


class SlotEngine:
    """The sequences of one model's context and the thread that decodes them.

    Args:
        name: the model's name (thread name, logs).
        slots: its sequences.
        lock: the model's lock, held for each iteration (a close, a draws call or a
            benchmark on the same model waits for the iteration, not for the generations).
        context: the llama.cpp context now, None once the model is closed.
        width: how many of ``n`` loops decoding one step takes (``step_width`` on the
            model's cost curve).
        capacity: the most tokens one batch holds (the context's ``n_batch``).
    """

    def __init__(
        self,
        *,
        name: str,
        slots: int,
        lock: threading.Lock,
        context: Callable[[], Any],
        width: Callable[[int], int],
        capacity: int,
    ) -> None:
        self._name = name
        self._free = list(range(slots))
        self._waiting: collections.deque[SlotJob] = collections.deque()
        self._live: list[_Slot] = []
        self._mutex = threading.Lock()
        self._thread: threading.Thread | None = None
        self._lock = lock
        self._context = context
        self._width = width
        self._capacity = capacity
        self._closed = False
        self.widest = 0
        """The most loops one step has decoded so far."""

    def submit(self, job: SlotJob) -> None:
        """Queue ``job`` for a free sequence; start the engine's thread if it is idle.

        Raises:
            GenerationError: the model is closed.
        """
        with self._mutex:
            if self._closed:
                raise GenerationError(f"model {self._name!r} is closed; load it again")
            self._waiting.append(job)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"slots:{self._name}", daemon=True
                )
                self._thread.start()

    def alive(self) -> bool:
        """Whether the engine's thread runs (it stops when it has nothing to do)."""
        with self._mutex:
            return self._thread is not None

    def free(self) -> int:
        """Sequences free now."""
        with self._mutex:
            return len(self._free)

    def beside(self) -> int:
        """Generations running or waiting now (the engine's thread: a loop asks it)."""
        return len(self._live) + len(self._waiting) - 1

    def close(self) -> None:
        """End every job (``GenerationError``: closed) and wait for the thread to stop."""
        with self._mutex:
            self._closed = True
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        batch = VerifyBatch(self._capacity)
        try:
            while self._once(batch):
                pass
        except BaseException as exc:  # a bug: every job hears of it, none hangs
            log.exception("slots.engine_failed", model=self._name)
            with self._mutex:
                jobs = [s.job for s in self._live] + list(self._waiting)
                self._live.clear()
                self._waiting.clear()
                self._thread = None
            for job in jobs:
                job.end(error=GenerationError(f"the slot engine of {self._name!r} failed: {exc!r}"))
        finally:
            batch.close()

    def _once(self, batch: VerifyBatch) -> bool:
        """One iteration (the module's steps); False once there is nothing left to do."""
        with self._mutex:
            if self._closed:
                gone = GenerationError(f"model {self._name!r} is closed; load it again")
                for job in self._waiting:
                    job.end(error=gone)
                self._waiting.clear()
            for job in [j for j in self._waiting if j.abort.is_set()]:
                self._waiting.remove(job)
                job.end(error=Aborted())
            if not self._live and not self._waiting:
                self._thread = None
                return False
        with self._lock:
            ctx = self._context()
            if ctx is None or self._closed:
                for slot in list(self._live):
                    self._end(ctx, slot, error=GenerationError(f"model {self._name!r} is closed"))
                return True
            for slot in [s for s in self._live if s.job.abort.is_set()]:
                self._end(ctx, slot, error=Aborted())
            self._admit(ctx)
            self._prefill(ctx, batch)
            self._step(ctx, batch)
        return True

    def _admit(self, ctx: Any) -> None:
        while True:
            with self._mutex:
                if not self._waiting or not self._free:
                    return
                slot = _Slot(job=self._waiting.popleft(), seq=self._free.pop(0))
                self._live.append(slot)
            try:
                slot.steps = slot.job.start(slot.seq)
            except Exception as exc:
                self._end(ctx, slot, error=exc)
                continue
            self._advance(ctx, slot, None)

    def _prefill(self, ctx: Any, batch: VerifyBatch) -> None:
        slot = next((s for s in self._live if s.want is not None and s.want.prefill), None)
        if slot is None or slot.want is None:
            return
        want = slot.want
        rows = [(t, want.start + i, slot.seq) for i, t in enumerate(want.tokens)]
        outputs = [i == len(rows) - 1 for i in range(len(rows))]
        status = batch.decode_rows(ctx, rows, outputs)
        self._after(ctx, [(slot, 0)], status)

    def _step(self, ctx: Any, batch: VerifyBatch) -> None:
        decoding = [s for s in self._live if s.want is not None and not s.want.prefill]
        decoding = decoding[: self._width(len(decoding))]
        rows: list[tuple[int, int, int]] = []
        outputs: list[bool] = []
        taken: list[tuple[_Slot, int]] = []
        for slot in decoding:
            want = slot.want
            assert want is not None
            if taken and len(rows) + len(want.tokens) > self._capacity:
                break
            taken.append((slot, len(rows)))
            last = len(want.tokens) - 1
            for i, token in enumerate(want.tokens):
                rows.append((token, want.start + i, slot.seq))
                outputs.append(want.every or i == last)
        if not taken:
            return
        self.widest = max(self.widest, len(taken))
        self._after(ctx, taken, batch.decode_rows(ctx, rows, outputs))

    def _after(self, ctx: Any, taken: list[tuple[_Slot, int]], status: int) -> None:
        """Resume the loops of a decoded batch with their first row (or no room)."""
        if status not in (0, 1):
            error = RuntimeError(f"llama_decode failed with status {status}")
            for slot, _ in taken:
                self._end(ctx, slot, error=error)
            return
        for slot, first in taken:
            self._advance(ctx, slot, NO_ROOM if status == 1 else first)

    def _advance(self, ctx: Any, slot: _Slot, index: int | None) -> None:
        """Run ``slot``'s loop to its next request (``index``: what its last one got)."""
        assert slot.steps is not None
        try:
            slot.want = next(slot.steps) if index is None else slot.steps.send(index)
        except StopIteration as done:
            self._end(ctx, slot, output=done.value)
        except Aborted:
            self._end(ctx, slot, error=Aborted())
        except Exception as exc:
            self._end(ctx, slot, error=exc)

    def _end(
        self,
        ctx: Any,
        slot: _Slot,
        *,
        output: GenerationOutput | None = None,
        error: BaseException | None = None,
    ) -> None:
        """``slot``'s loop is over: close it, free its sequence's cells, tell its caller."""
        if slot.steps is not None:
            slot.steps.close()
        if ctx is not None:
            kv_state.clear(ctx, slot.seq)
        with self._mutex:
            self._live.remove(slot)
            self._free.append(slot.seq)
            self._free.sort()
        slot.job.end(output, error)
