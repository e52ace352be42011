"""Loading a GGUF model: file checks, footprint, the llama.cpp model and context, identity."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import anyio
import llama_cpp
import structlog

from swapos.backends.llama.model import LlamaModel
from swapos.backends.llama.runtime import Aborted, init_llama, layer_report
from swapos.backends.llama.slots import context_batch
from swapos.data.residency import Offload
from swapos.errors import ModelFileError
from swapos.models.digests import file_digest
from swapos.models.gguf import GGUFInfo, read_gguf
from swapos.models.spec import ModelSpec
from swapos.policies.drafting import MAX_DRAFT
from swapos.policies.memory import (
    KV_TYPES,
    estimate_device_footprint,
    estimate_footprint,
    kv_cache_bytes,
)
from swapos.sysinfo import device_used_bytes, release_free_heap, rss_bytes

log = structlog.get_logger(__name__)

_INFOS: dict[tuple[str, int, int], GGUFInfo] = {}


def gguf_info(path: str) -> GGUFInfo:
    """The GGUF header of ``path`` (cached per path, size and mtime).

    Raises:
        ModelFileError: the file is missing, truncated or not GGUF (the message names it).
    """
    try:
        stat = os.stat(path)
    except OSError:
        return read_gguf(path)  # raises ModelFileError naming the file
    key = (path, stat.st_size, stat.st_mtime_ns)
    if key not in _INFOS:
        _INFOS[key] = read_gguf(path)
    return _INFOS[key]


def footprint_estimate(spec: ModelSpec) -> int:
    """Host bytes ``spec`` is expected to hold once loaded (``spec.footprint_bytes`` if set)."""
    if spec.footprint_bytes is not None:
        return spec.footprint_bytes
    info = gguf_info(spec.path)
    return estimate_footprint(
        info.file_size, info, n_ctx=context_cells(spec),
        n_batch=max(spec.n_batch, context_batch(spec)),
        type_k=spec.type_k, type_v=spec.type_v, gpu_layers=spec.gpu_layers,
    )  # fmt: skip


def context_cells(spec: ModelSpec) -> int:
    """KV cells of ``spec``'s context: ``n_ctx`` per slot (each sequence has its own)."""
    return spec.n_ctx * max(spec.slots, 1)


def device_footprint_estimate(spec: ModelSpec) -> int:
    """GPU bytes ``spec`` is expected to hold once loaded (0 when it offloads nothing)."""
    if not spec.offloaded:
        return 0
    info = gguf_info(spec.path)
    return estimate_device_footprint(
        info.file_size, info, n_ctx=context_cells(spec),
        n_batch=max(spec.n_batch, context_batch(spec)),
        type_k=spec.type_k, type_v=spec.type_v, gpu_layers=spec.gpu_layers,
    )  # fmt: skip


def state_bytes_estimate(spec: ModelSpec) -> int:
    """Bytes of a saved KV state of ``spec``'s whole context, one sequence's
    (:func:`kv_cache_bytes`)."""
    info = gguf_info(spec.path)
    return kv_cache_bytes(info, n_ctx=spec.n_ctx, type_k=spec.type_k, type_v=spec.type_v)


def load_model(
    spec: ModelSpec,
    abort: threading.Event,
    *,
    limiter: anyio.CapacityLimiter | None = None,
    peers: Callable[[], Iterable[LlamaModel]] | None = None,
    progress: Callable[[float], None] | None = None,
) -> LlamaModel:
    """Load ``spec`` synchronously (in a worker thread); ``abort`` cancels the load;
    ``peers``: the other models resident beside it (drafters it may borrow); ``progress``
    is told llama.cpp's progress reports (0 to 1).

    Raises:
        ModelFileError: the file is bad; ``Aborted`` when ``abort`` was set.
    """
    info = gguf_info(spec.path)  # validates magic, header and tensor data size
    estimate = footprint_estimate(spec)
    init_llama()
    digest = threading.Thread(target=file_digest, args=(spec.path,), daemon=True)
    digest.start()  # overlaps hashing with the load (both read the same pages)
    rss0 = rss_bytes()
    device0 = device_used_bytes() if spec.offloaded else 0
    started = time.perf_counter()
    with layer_report() as layers:
        model, ctx, upload_s = _open(spec, abort, progress)
    delta = rss_bytes() - rss0
    offload = None
    if spec.offloaded:
        offload = _offload(spec, layers, device_used_bytes() - device0, upload_s)
    digest.join()
    loaded = LlamaModel(
        spec, model, ctx, footprint=max(delta, estimate), identity=kv_identity(spec),
        limiter=limiter, offload=offload, token_table=info.token_table_digest, peers=peers,
    )  # fmt: skip
    log.info(
        "model_load.done", model=spec.name, path=spec.path, rss_delta=delta, estimate=estimate,
        seconds=round(time.perf_counter() - started, 3), offload=offload,
    )  # fmt: skip
    return loaded


def _offload(
    spec: ModelSpec, layers: dict[int, str], device_delta: int, upload_s: float
) -> Offload:
    """Where ``spec``'s layers went (llama.cpp's report) and what the device gained: the
    measured change in its used memory, or the estimate when nothing was measured."""
    on_device = [d for d in layers.values() if d != "CPU"]
    device = max(set(on_device), key=on_device.count) if on_device else ""
    measured = device_delta if device_delta > 0 else device_footprint_estimate(spec)
    return Offload(
        device=device, layers=len(on_device), device_bytes=measured if on_device else 0,
        upload_s=upload_s if on_device else 0.0,
    )  # fmt: skip


def kv_identity(spec: ModelSpec) -> str:
    """Key of the KV states a model loaded from ``spec`` can restore: file sha256, size,
    mtime, ``n_ctx``, KV types, the offload setting (``n_gpu_layers``: a GPU's kernels do
    not compute bit for bit what the CPU's do), the slots (a state records its context's
    KV streams, one per slot, and llama.cpp restores it only into as many) and the
    llama-cpp-python version."""
    stat = os.stat(spec.path)
    slots = f";slots={spec.slots}" if spec.slots > 1 else ""
    return (
        f"sha256={file_digest(spec.path)};size={stat.st_size};mtime_ns={stat.st_mtime_ns};"
        f"n_ctx={spec.n_ctx};kv={spec.type_k}/{spec.type_v};ngl={spec.gpu_layers}{slots};"
        f"llama_cpp={llama_cpp.__version__}"
    )


def _kv_type(spec: ModelSpec, name: str) -> int:
    try:
        return KV_TYPES[name][0]
    except KeyError:
        raise ModelFileError(
            f"model {spec.name}: KV cache type {name!r} is not one of {', '.join(KV_TYPES)}"
        ) from None


def model_params(spec: ModelSpec) -> Any:
    """llama.cpp's model parameters for ``spec`` (no progress callback yet): the offload
    setting (``n_gpu_layers``: 0 none, -1 all; ``main_gpu``), mmap, repacking."""
    mparams = llama_cpp.llama_model_default_params()
    mparams.n_gpu_layers = spec.gpu_layers
    mparams.main_gpu = spec.main_gpu
    mparams.load_mode = llama_cpp.LLAMA_LOAD_MODE_MMAP if spec.use_mmap else 0
    # Repacking copies the repackable weights (Q4_0, Q4_K, IQ4_NL...) into interleaved
    # anonymous buffers. Measured here on Qwen2.5-Coder 1.5B Q4_K_M (n_ctx 4096, 2 cores):
    # RSS 1.81 GiB with it vs 1.22 GiB without, load 1.86 s vs 0.74 s, decode 10.5-12.0 vs
    # 11.9-12.6 tok/s. Off by default: a swapping runtime pays for memory and loads.
    mparams.use_extra_bufts = spec.repack
    return mparams


def _open(
    spec: ModelSpec, abort: threading.Event, told: Callable[[float], None] | None = None
) -> tuple[Any, Any, float]:
    """The llama.cpp model and context for ``spec``, and the seconds llama.cpp spent loading
    tensor data (from its first progress report to its last: with layers offloaded, the
    read of their tensors and their upload to the device); nothing stays allocated on
    failure. ``told`` gets each progress report's fraction."""
    if abort.is_set():
        raise Aborted
    mparams = model_params(spec)
    reports: list[float] = []

    @llama_cpp.llama_progress_callback  # type: ignore[untyped-decorator]
    def progress(fraction: float, _data: Any) -> bool:
        reports.append(time.perf_counter())
        if told is not None:
            told(float(fraction))
        return not abort.is_set()

    mparams.progress_callback = progress
    model = llama_cpp.llama_model_load_from_file(spec.path.encode(), mparams)
    if not model:
        release_free_heap()
        if abort.is_set():
            raise Aborted
        raise ModelFileError(
            f"llama.cpp {llama_cpp.__version__} could not load {spec.path}; check that it is "
            "a complete GGUF model of an architecture this llama.cpp supports"
        )
    threads = spec.threads
    slots = max(spec.slots, 1)
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = context_cells(spec)
    cparams.n_batch = cparams.n_ubatch = context_batch(spec)
    cparams.n_seq_max = slots  # one sequence per slot (backends/llama/slots.py)
    cparams.kv_unified = False  # each its own n_ctx cells, attending to its own only
    cparams.n_outputs_max = MAX_DRAFT + slots  # a verification batch has logits at each token
    cparams.n_threads = cparams.n_threads_batch = threads
    cparams.type_k = _kv_type(spec, spec.type_k)
    cparams.type_v = _kv_type(spec, spec.type_v)
    cparams.no_perf = True
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    if not ctx or abort.is_set():
        if ctx:
            llama_cpp.llama_free(ctx)
        llama_cpp.llama_model_free(model)
        release_free_heap()
        if abort.is_set():
            raise Aborted
        raise ModelFileError(
            f"llama.cpp could not create a context for {spec.path} (n_ctx={spec.n_ctx}, "
            f"slots={slots}, n_batch={spec.n_batch}, KV {spec.type_k}/{spec.type_v}); lower "
            "n_ctx or the slots, or change the KV types in the profile"
        )
    return model, ctx, (reports[-1] - reports[0]) if reports else 0.0
