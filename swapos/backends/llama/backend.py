"""``LlamaBackend``: loads GGUF models with llama.cpp, warms their files, reads tokenizers."""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Sequence

import anyio

from swapos.backends.errors import LIBRARY_ERRORS, map_exceptions
from swapos.backends.llama.calibration import Calibration, needs_calibration
from swapos.backends.llama.draft_costs import costs_for
from swapos.backends.llama.loading import (
    device_footprint_estimate,
    footprint_estimate,
    gguf_info,
    load_model,
    state_bytes_estimate,
)
from swapos.backends.llama.model import LlamaModel
from swapos.backends.llama.vocab import shared_counter
from swapos.backends.pagecache import cached_fraction
from swapos.backends.threads import run_in_worker
from swapos.errors import ModelFileError
from swapos.models.gguf import GGUFInfo, open_model_file
from swapos.models.resolve import refuse_offload
from swapos.models.spec import ModelSpec
from swapos.models.templates import ChatFormat, FimTokens
from swapos.policies.draws import curve_from_ratios
from swapos.policies.spending import PREFILL_SHARE, ModelCost
from swapos.sysinfo import gpu_offload_supported

_WARM_CHUNK = 8 << 20
WARM_ENOUGH = 0.99
"""A file with this share of its pages cached is not warmed again."""


def _reading_vocabulary(spec: ModelSpec) -> contextlib.AbstractContextManager[None]:
    return map_exceptions(
        {LIBRARY_ERRORS: ModelFileError},
        f"reading the vocabulary of {spec.path}",
        advice="check that it is a complete GGUF model",
    )


class LlamaBackend:
    """Loads GGUF models with llama.cpp (implements ``ModelBackend``).

    Args:
        load_limiter: bounds concurrent loads; default: one load at a time.
        generate_limiter: bounds concurrent generations of the models this backend loads.
        calibrate: a model loaded with no measured decode costs measures them while it is
            idle (:mod:`~swapos.backends.llama.calibration`).
    """

    def __init__(
        self,
        *,
        load_limiter: anyio.CapacityLimiter | None = None,
        generate_limiter: anyio.CapacityLimiter | None = None,
        calibrate: bool = False,
    ) -> None:
        self._load_limiter = load_limiter or anyio.CapacityLimiter(1)
        self._generate_limiter = generate_limiter
        self._calibrate = calibrate
        self._resident: weakref.WeakSet[LlamaModel] = weakref.WeakSet()

    def resident(self) -> list[LlamaModel]:
        """The models it loaded that are not closed (each may draft for another,
        ``policies/model_drafts.py``)."""
        return [m for m in list(self._resident) if not m.closed]

    def info(self, path: str) -> GGUFInfo:
        """The GGUF header of ``path`` (cached per path, size and mtime)."""
        return gguf_info(path)

    def estimate_footprint(self, spec: ModelSpec) -> int:
        """Host bytes ``spec`` is expected to hold once loaded (``spec.footprint_bytes`` if
        set); its offloaded layers' share is on the device instead."""
        return footprint_estimate(spec)

    def estimate_device_footprint(self, spec: ModelSpec) -> int:
        """GPU bytes ``spec`` is expected to hold once loaded (0 with ``gpu_layers = 0``)."""
        return device_footprint_estimate(spec)

    def estimate_state_bytes(self, spec: ModelSpec) -> int:
        """Bytes of a saved KV state of the whole context (the host's share of it)."""
        return state_bytes_estimate(spec)

    def draw_curve(self, spec: ModelSpec) -> dict[int, float]:
        """The cost curve of the drafting costs ``spec``'s model reads
        (``backends/llama/draft_costs.py``: a profile's pin or ``bench decode``'s cache; a
        profile's ``draft = "off"`` turns off both levers it measures)."""
        costs = costs_for(spec)
        return curve_from_ratios(costs.verify_ratio) if costs is not None else {}

    def check_devices(self, specs: Sequence[ModelSpec]) -> None:
        """Refuse layers on a GPU when llama-cpp-python is a CPU-only build
        (``llama_supports_gpu_offload``).

        Raises:
            ProfileError: one line naming the model's ``gpu_layers`` and how to install a
                GPU build.
        """
        if any(s.offloaded for s in specs) and not gpu_offload_supported():
            refuse_offload(specs, build="this llama-cpp-python is a CPU-only build")

    def token_counter(self, spec: ModelSpec) -> Callable[[str], int]:
        """Counts tokens as ``spec``'s tokenizer does (BOS included), from a vocab-only load.

        Blocking (reads the vocabulary, ~0.1 s for Gemma): call it from a worker thread.
        Counters are shared by models with the same architecture and vocabulary size and
        live as long as the process.

        Raises:
            ModelFileError: the file is missing or not loadable.
        """
        info = gguf_info(spec.path)  # validates the file first
        with _reading_vocabulary(spec):
            return shared_counter(spec.path, info)

    def chat_format(self, spec: ModelSpec) -> ChatFormat | None:
        """The GGUF's ``tokenizer.chat_template`` with its special tokens (None without one).

        Blocking (reads the vocabulary): call it from a worker thread.

        Raises:
            ModelFileError: the file is missing or not loadable.
        """
        info = gguf_info(spec.path)
        template = info.metadata.get("tokenizer.chat_template")
        if not isinstance(template, str) or not template.strip():
            return None
        with _reading_vocabulary(spec):
            return shared_counter(spec.path, info).chat_format(template)

    def model_cost(self, spec: ModelSpec) -> ModelCost | None:
        """``spec``'s measured step and prefill walls (its drafting costs: a profile's pin
        or ``bench decode``'s cache), None when they are not measured."""
        costs = costs_for(spec)
        if costs is None or costs.step_s <= 0:
            return None
        step_ms = costs.step_s * 1000
        prefill_ms = costs.prefill_s_per_token * 1000 or step_ms * PREFILL_SHARE
        return ModelCost(ms_per_token=step_ms, prefill_ms_per_token=prefill_ms)

    def fim_tokens(self, spec: ModelSpec) -> FimTokens | None:
        """The fill-in-the-middle tokens of ``spec``'s vocabulary (None without them).

        Blocking (reads the vocabulary): call it from a worker thread.

        Raises:
            ModelFileError: the file is missing or not loadable.
        """
        info = gguf_info(spec.path)
        with _reading_vocabulary(spec):
            return shared_counter(spec.path, info).fim_tokens()

    async def load(
        self, spec: ModelSpec, *, progress: Callable[[float], None] | None = None
    ) -> LlamaModel:
        """Load ``spec`` in a worker thread; ``progress`` is told llama.cpp's progress
        (0 to 1, from the loading thread) as it reads the tensors.

        Raises:
            ModelFileError: missing, truncated or unloadable file (the message names it).

        On cancellation the load is aborted through llama.cpp's progress callback, anything
        already allocated is freed, and the cancellation is re-raised. With mmap, llama.cpp
        first maps and parses the whole file (~0.7 s for the F16 model here) and only then
        reports progress, so a cancellation during that phase takes effect after it (the
        context, the KV cache and the compute buffers are never allocated).
        """
        box: list[LlamaModel] = []

        def work(abort: threading.Event) -> LlamaModel:
            with map_exceptions(
                {LIBRARY_ERRORS: ModelFileError},
                f"loading model {spec.name!r} from {spec.path}",
                advice="check that the file is a complete GGUF model and that n_ctx fits memory",
            ):
                loaded = load_model(
                    spec, abort, limiter=self._generate_limiter, peers=self.resident,
                    progress=progress,
                )  # fmt: skip
                box.append(loaded)
            self._resident.add(box[0])
            if (
                self._calibrate
                and loaded.slots == 1
                and needs_calibration(spec, loaded.draft_costs)
            ):
                Calibration(loaded).start()  # measures its decode costs while it is idle
            return box[0]

        try:
            return await run_in_worker(work, limiter=self._load_limiter)
        except BaseException:
            if box:  # finished just as we were cancelled: do not leak it
                with anyio.CancelScope(shield=True):
                    await box[0].close()
            raise

    async def warm(self, spec: ModelSpec) -> None:
        """Bring ``spec``'s file into the page cache: ``posix_fadvise(WILLNEED)`` + read-ahead.
        A file already (99%) cached is not read again (``mincore``, no CPU taken from the
        generation the warm-up runs beside).

        Cancellation stops the read-ahead within one 8 MiB chunk.
        """

        def work(abort: threading.Event) -> None:
            if (cached_fraction(spec.path) or 0.0) >= WARM_ENOUGH:
                return
            try:
                with open(open_model_file(spec.path), "rb", buffering=0) as f:
                    if hasattr(os, "posix_fadvise"):
                        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_WILLNEED)
                    chunk = bytearray(_WARM_CHUNK)
                    while not abort.is_set() and f.readinto(chunk):
                        pass
            except OSError as exc:
                raise ModelFileError(
                    f"cannot read model file {spec.path}: {exc.strerror}; check the path"
                ) from exc

        await run_in_worker(work)  # not behind load_limiter: a warm-up never delays a load

    async def drop_page_cache(self, spec: ModelSpec) -> bool:
        """``posix_fadvise(DONTNEED)`` on ``spec``'s file: its clean, unmapped pages leave
        the page cache, so the next load reads from disk. False where unsupported."""

        def work(abort: threading.Event) -> bool:
            if not hasattr(os, "posix_fadvise"):
                return False
            try:
                with open(spec.path, "rb", buffering=0) as f:
                    os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError:
                return False
            return True

        return await run_in_worker(work)
