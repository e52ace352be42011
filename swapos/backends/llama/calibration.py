"""Decode costs measured in the background: a loaded model with none measures its cost curve
while it is idle, so drafting is on where it pays without a run of ``bench decode``.

A model loaded with no measured costs (none cached for its file and thread count, none
pinned, drafting not ``"off"``) gets a :class:`Calibration` thread when the backend was asked
for one (``swapos serve`` asks; ``--no-calibrate`` does not). The thread waits until the model
has been left alone for :data:`IDLE_S`, then measures the curve a step at a time with the
model's lock (:meth:`~swapos.backends.llama.model.LlamaModel.measure_idle`, which never
waits for it): the context's prefill, then one round of batches per step. A request that
arrives meanwhile waits for the step under way (a prefill of :data:`CONTEXT_TOKENS` tokens or
one round: about a second on the 1.5B here); a step that finds the context used since the
previous one prefills again. When the rounds are done the costs are saved where ``bench
decode`` saves them (:func:`~swapos.backends.llama.draft_costs.save_cached`), so every later
load reads them (and plans its slots on them), and the model drafts with them from its next
generation. The curve alone, no acceptance replayed: drafting learns acceptance as it
decodes (``policies/drafting.py``, rule 5).

A curve measured while other processes take the cores the model's threads need is noise
(a step of 0.30 s against 0.06 s quiet, ratios out of order), and a saved curve is read by
every later load. So the thread counts the CPU the rest of the machine spends during its
steps (:func:`~swapos.sysinfo.others_cpu_seconds`), and a measurement the rule
:func:`machine_busy` calls busy is thrown away and begun again after :data:`BACKOFF_S`; after
:data:`TRIES` busy ones it gives up, saves nothing, and says to run ``swapos bench decode``
on a quiet machine (the model runs on without drafting, as before the measurement).
:data:`BUSY_OK_ENV` turns the rule off.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Protocol

import structlog

from swapos.backends.llama.cost_curve import CurveMeter, measuring_context
from swapos.backends.llama.draft_costs import save_cached
from swapos.backends.llama.handles import Handles
from swapos.data.generation import DraftCosts
from swapos.models.spec import ModelSpec
from swapos.sysinfo import others_cpu_seconds

log = structlog.get_logger(__name__)

IDLE_S = 2.0
"""How long a model must have been left alone before a measuring step."""
POLL_S = 0.25
SIZES = (2, 4, 8, 12)
"""Verification batch sizes measured (``bench decode``'s default)."""
REPEATS = 5
CONTEXT_TOKENS = 256
SLACK_CORES = 0.25
"""The share of a core other processes may use beside the model's threads (:func:`machine_busy`)."""
BACKOFF_S = 30.0
"""How long a busy measurement waits before it begins again."""
TRIES = 3
"""Busy measurements before the thread gives up."""


BUSY_OK_ENV = "SWAPOS_CALIBRATE_BUSY_OK"
"""Set (to anything but ""): measure whatever the machine's load (:func:`machine_busy` off),
for machines that are never quiet and for tests that must not depend on the load."""


def _others_reader() -> Callable[[], float | None]:
    """Other processes' CPU seconds, or a reader that knows nothing (the rule off)."""
    return (lambda: None) if os.environ.get(BUSY_OK_ENV) else others_cpu_seconds


def machine_busy(others_s: float, steps_s: float, *, cores: int, threads: int) -> bool:
    """Whether the rest of the machine took cores the model's ``threads`` needed while it
    measured: other processes' CPU seconds during the steps (``others_s``), averaged over
    the steps' wall (``steps_s``), above the cores the threads leave free plus
    :data:`SLACK_CORES` (on 2 cores and 2 threads: a quarter of a core)."""
    if steps_s <= 0:
        return False
    return others_s / steps_s > max(cores - threads, 0) + SLACK_CORES


class Measured(Protocol):
    """What a :class:`Calibration` needs of a loaded model."""

    @property
    def spec(self) -> ModelSpec: ...

    @property
    def closed(self) -> bool: ...

    @property
    def slots(self) -> int: ...

    def measure_idle(self, step: Callable[[Handles, bool], bool]) -> bool: ...

    def adopt_costs(self, costs: DraftCosts) -> None: ...


def needs_calibration(spec: ModelSpec, costs: DraftCosts | None) -> bool:
    """Whether a model loaded from ``spec`` with ``costs`` (what it read at load:
    :func:`~swapos.backends.llama.draft_costs.costs_for`) may measure its own: a local model
    with none, drafting neither pinned to a file nor ``"off"``."""
    return not spec.remote and not spec.draft and costs is None


class Calibration(threading.Thread):
    """Measures ``model``'s cost curve while it is idle, then saves and adopts the costs.

    Stops when the model is closed. ``idle_s`` and ``poll_s`` are for tests.
    """

    def __init__(
        self,
        model: Measured,
        *,
        idle_s: float = IDLE_S,
        poll_s: float = POLL_S,
        backoff_s: float = BACKOFF_S,
        others: Callable[[], float | None] | None = None,
    ) -> None:
        super().__init__(name=f"calibrate-{model.spec.name}", daemon=True)
        self.model = model
        self.idle_s = idle_s
        self.poll_s = poll_s
        self.backoff_s = backoff_s
        self.costs: DraftCosts | None = None
        self.steps = 0
        self.prefills = 0
        self.busy_tries = 0
        self._others = others or _others_reader()
        self._meter: CurveMeter | None = None
        self._stale = True  # the context holds no prefill of ours
        self._used = False
        self._others_s = 0.0  # other processes' CPU seconds during this try's steps
        self._steps_s = 0.0

    def run(self) -> None:
        try:
            self._measure()
        except Exception as exc:  # a measurement never takes the model down with it
            log.warning("calibration.failed", model=self.model.spec.name, error=repr(exc))

    def _measure(self) -> None:
        model = self.model
        started = time.perf_counter()
        while True:
            if not self._one_try():
                return
            if not self._busy():
                break
            self.busy_tries += 1
            log.info("calibration.busy", model=model.spec.name, busy_tries=self.busy_tries,
                     others_cores=round(self._others_s / self._steps_s, 2))  # fmt: skip
            if self.busy_tries >= TRIES:
                log.warning(
                    "calibration.abandoned", model=model.spec.name,
                    hint="other processes kept the cores busy: run `swapos bench decode` on "
                    "a quiet machine to measure decode costs (drafting stays off until then)",
                )  # fmt: skip
                return
            self._meter, self._stale, self._others_s, self._steps_s = None, True, 0.0, 0.0
            if not self._wait(self.backoff_s):
                return
        assert self._meter is not None
        curve = self._meter.curve()
        costs = DraftCosts(
            verify_ratio=curve.verify_ratio(),
            source=f"measured in the background {time.strftime('%F')}",
            step_s=curve.ms_per_token / 1000,
            prefill_s_per_token=1 / curve.prefill_tok_s if curve.prefill_tok_s else 0.0,
        )
        try:
            path = save_cached(model.spec, costs)
        except OSError as exc:  # the model still drafts with them while it stays loaded
            log.warning("calibration.unsaved", model=model.spec.name, error=str(exc))
            path = None
        model.adopt_costs(costs)
        self.costs = costs
        log.info(
            "calibration.done", model=model.spec.name, ms_per_token=round(curve.ms_per_token, 2),
            ratios={p.tokens: round(p.ratio, 3) for p in curve.points}, saved=str(path),
            steps=self.steps, prefills=self.prefills,
            seconds=round(time.perf_counter() - started, 1),
        )  # fmt: skip

    def _one_try(self) -> bool:
        """Measure the whole curve, a step at a time while the model is idle (False: the
        model was closed or has slots)."""
        model = self.model
        quiet_since = time.monotonic()
        while self._meter is None or not self._meter.done:
            time.sleep(self.poll_s)
            if model.closed or model.slots > 1:
                return False
            if not model.measure_idle(self._probe) or self._used:  # busy now, or used since
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= self.idle_s:
                model.measure_idle(self._step)
        return True

    def _busy(self) -> bool:
        """Whether this try's steps ran on a busy machine (:func:`machine_busy`)."""
        cores = os.cpu_count() or 1
        threads = min(self.model.spec.threads, cores)
        return machine_busy(self._others_s, self._steps_s, cores=cores, threads=threads)

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` in polls (False: the model was closed meanwhile)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(self.poll_s)
            if self.model.closed:
                return False
        return True

    def _probe(self, _h: Handles, used: bool) -> bool:
        """A look under the lock: was the model used since the last one?"""
        self._used = used
        self._stale = self._stale or used
        return False

    def _step(self, h: Handles, used: bool) -> bool:
        """One measuring step: a prefill (the first, or after the model was used), or a
        round of batches."""
        others0, t0 = self._others(), time.perf_counter()
        if self._meter is None:
            self._meter = CurveMeter(measuring_context(h, CONTEXT_TOKENS), SIZES, REPEATS)
        if used or self._stale:
            self._meter.prefill(h)
            self.prefills += 1
            self._stale = False
        else:
            self._meter.round(h)
        self.steps += 1
        others1 = self._others()
        if others0 is not None and others1 is not None:  # unknown (no /proc): never busy
            self._others_s += max(others1 - others0, 0.0)
            self._steps_s += time.perf_counter() - t0
        return True
