"""The llama.cpp backend, over llama-cpp-python's low-level C API.

We drive ``llama_model_load_from_file`` / ``llama_init_from_model`` / ``llama_decode``
directly instead of the high-level ``Llama`` class, for three reasons:

* a load can be aborted: the model params' ``progress_callback`` returns ``False`` once the
  awaiting task is cancelled (``Llama`` offers no way to pass it);
* no ``n_batch x n_vocab`` float32 ``scores`` array (0.5 GB at ``n_batch=512`` for Gemma's
  262k vocabulary): we ask llama.cpp for one output row per batch (``n_outputs_max=1``);
* prefix state is saved and restored per sequence (``llama_state_seq_*``), which copies only
  the KV cells, not logits or scores.

Choice of ``n_batch``: 128. Measured on this machine (2 cores, no GPU, other jobs running,
so best of 4 rounds) with Gemma 3 270M Q8_0, n_ctx 2048, a 394-token prompt; TTFT is the
first generation right after a fresh load (the first eval touches every weight page and the
compute buffers); prefill is the best of 3 warm runs; RSS is the delta across load +
generation::

    n_batch   TTFT after load   prefill tok/s   RSS MiB
         16            0.97 s             420     361.1
         32            0.77 s             510     361.4
         64            0.70 s             593     363.2
        128            0.53 s             707     365.8
        512            0.60 s             691     377.7

Past 128 prefill gets no faster on 2 cores while the compute buffer keeps growing (~35 KB
per batch token). With one output row per batch the 262k vocabulary costs 1 MiB whatever
``n_batch`` is; through the ``Llama`` class ``n_batch=512`` would add a 512 MiB scores array.
A prefill chunk of 128 tokens takes ~0.2 s, which bounds cancellation latency during prefill.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import functools
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import llama_cpp
import msgspec
import numpy as np
import structlog

from swapos.backends.base import GenerationOutput, PrefixState, SamplingParams
from swapos.backends.threads import run_in_worker
from swapos.errors import ModelFileError
from swapos.messages.generation import GenerationStats, StopReason
from swapos.models.digests import file_digest
from swapos.models.gguf import GGUFInfo, read_gguf
from swapos.models.spec import ModelSpec
from swapos.models.templates import ChatFormat
from swapos.policies.memory import KV_TYPES, estimate_footprint
from swapos.policies.tokens import common_prefix_len
from swapos.sysinfo import rss_bytes

log = structlog.get_logger(__name__)

_WARM_CHUNK = 8 << 20
_init_lock = threading.Lock()


class _Aborted(Exception):
    """The worker saw the abort flag; the cancellation that set it is re-raised by anyio."""


def _init_llama() -> None:
    """Initialize the backend once and keep llama.cpp's log lines off stderr."""
    with _init_lock:
        _init_once()


@functools.cache
def _init_once() -> None:
    llama_cpp.llama_backend_init()
    llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))


@llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
def _log_callback(level: int, text: bytes, _data: Any) -> None:
    """Route llama.cpp's errors to structlog; drop its chatter."""
    if level == 4:  # GGML_LOG_LEVEL_ERROR (ggml: NONE, DEBUG, INFO, WARN, ERROR, CONT)
        log.warning("llama_cpp.log", text=text.decode(errors="replace").rstrip())


def _malloc_trim() -> None:
    """Give freed heap back to the OS: llama.cpp frees in worker threads' malloc arenas,
    which glibc otherwise keeps (~50 MB per arena, so RSS would not drop after a close)."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to do
        ctypes.CDLL(None).malloc_trim(0)


def _kv_type(spec: ModelSpec, name: str) -> int:
    try:
        return KV_TYPES[name][0]
    except KeyError:
        raise ModelFileError(
            f"model {spec.name}: KV cache type {name!r} is not one of {', '.join(KV_TYPES)}"
        ) from None


class LlamaBackend:
    """Loads GGUF models with llama.cpp (implements ``ModelBackend``).

    Args:
        load_limiter: bounds concurrent loads; default: one load at a time.
        generate_limiter: bounds concurrent generations of the models this backend loads.
    """

    def __init__(
        self,
        *,
        load_limiter: anyio.CapacityLimiter | None = None,
        generate_limiter: anyio.CapacityLimiter | None = None,
    ) -> None:
        self._load_limiter = load_limiter or anyio.CapacityLimiter(1)
        self._generate_limiter = generate_limiter
        self._infos: dict[tuple[str, int, int], GGUFInfo] = {}

    def info(self, path: str) -> GGUFInfo:
        """The GGUF header of ``path`` (cached per path, size and mtime)."""
        try:
            stat = os.stat(path)
        except OSError:
            return read_gguf(path)  # raises ModelFileError naming the file
        key = (path, stat.st_size, stat.st_mtime_ns)
        if key not in self._infos:
            self._infos[key] = read_gguf(path)
        return self._infos[key]

    def estimate_footprint(self, spec: ModelSpec) -> int:
        """Bytes ``spec`` is expected to hold once loaded (``spec.footprint_bytes`` if set)."""
        if spec.footprint_bytes is not None:
            return spec.footprint_bytes
        info = self.info(spec.path)
        return estimate_footprint(
            info.file_size, info, n_ctx=spec.n_ctx, n_batch=spec.n_batch,
            type_k=spec.type_k, type_v=spec.type_v,
        )  # fmt: skip

    def token_counter(self, spec: ModelSpec) -> Callable[[str], int]:
        """Counts tokens as ``spec``'s tokenizer does (BOS included), from a vocab-only load.

        Blocking (reads the vocabulary, ~0.1 s for Gemma): call it from a worker thread.
        Counters are shared by models with the same architecture and vocabulary size and
        live as long as the process.

        Raises:
            ModelFileError: the file is missing or not loadable.
        """
        info = self.info(spec.path)  # validates the file first
        # A vocabulary-only load holds ~45 MiB for Gemma's 262k tokens. Models of one
        # family share their tokenizer, so one counter serves every file with the same
        # architecture and vocabulary size, for the life of the process. (Counts only size
        # prompts; the Generator tokenizes with the model itself.)
        key = f"{info.architecture}:{info.vocab_size}"
        with _COUNTERS_LOCK:
            if key not in _COUNTERS:
                _COUNTERS[key] = _TokenCounter(spec.path)
            return _COUNTERS[key]

    def chat_format(self, spec: ModelSpec) -> ChatFormat | None:
        """The GGUF's ``tokenizer.chat_template`` with its special tokens (None without one).

        Blocking (reads the vocabulary): call it from a worker thread.

        Raises:
            ModelFileError: the file is missing or not loadable.
        """
        template = self.info(spec.path).metadata.get("tokenizer.chat_template")
        if not isinstance(template, str) or not template.strip():
            return None
        counter = self.token_counter(spec)
        assert isinstance(counter, _TokenCounter)
        return counter.chat_format(template)

    async def load(self, spec: ModelSpec) -> LlamaModel:
        """Load ``spec`` in a worker thread.

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
            box.append(load_model(spec, abort, self, limiter=self._generate_limiter))
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

        Cancellation stops the read-ahead within one 8 MiB chunk.
        """

        def work(abort: threading.Event) -> None:
            try:
                with open(spec.path, "rb", buffering=0) as f:
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


def load_model(
    spec: ModelSpec,
    abort: threading.Event,
    backend: LlamaBackend | None = None,
    *,
    limiter: anyio.CapacityLimiter | None = None,
) -> LlamaModel:
    """Load ``spec`` synchronously (in a worker thread); ``abort`` cancels the load.

    Raises:
        ModelFileError: the file is bad; ``_Aborted`` when ``abort`` was set.
    """
    backend = backend or LlamaBackend()
    info = backend.info(spec.path)  # validates magic, header and tensor data size
    estimate = backend.estimate_footprint(spec)
    _init_llama()
    digest = threading.Thread(target=file_digest, args=(spec.path,), daemon=True)
    digest.start()  # overlaps hashing with the load (both read the same pages)
    rss0 = rss_bytes()
    started = time.perf_counter()
    model, ctx = _open(spec, abort)
    loaded = LlamaModel(spec, model, ctx, info=info, limiter=limiter)
    delta = rss_bytes() - rss0
    loaded._footprint = max(delta, estimate)
    digest.join()
    loaded._identity = _identity(spec)
    log.info(
        "model_load.done", model=spec.name, path=spec.path, rss_delta=delta, estimate=estimate,
        seconds=round(time.perf_counter() - started, 3),
    )  # fmt: skip
    return loaded


def _open(spec: ModelSpec, abort: threading.Event) -> tuple[Any, Any]:
    if abort.is_set():
        raise _Aborted
    mparams = llama_cpp.llama_model_default_params()
    mparams.n_gpu_layers = 0
    mparams.load_mode = llama_cpp.LLAMA_LOAD_MODE_MMAP if spec.use_mmap else 0
    # Repacking copies the repackable weights (Q4_0, Q4_K, IQ4_NL...) into interleaved
    # anonymous buffers. Measured here on Qwen2.5-Coder 1.5B Q4_K_M (n_ctx 4096, 2 cores):
    # RSS 1.81 GiB with it vs 1.22 GiB without, load 1.86 s vs 0.74 s, decode 10.5-12.0 vs
    # 11.9-12.6 tok/s. Off by default: a swapping runtime pays for memory and loads.
    mparams.use_extra_bufts = spec.repack

    @llama_cpp.llama_progress_callback  # type: ignore[untyped-decorator]
    def progress(_fraction: float, _data: Any) -> bool:
        return not abort.is_set()

    mparams.progress_callback = progress
    model = llama_cpp.llama_model_load_from_file(spec.path.encode(), mparams)
    if not model:
        _malloc_trim()
        if abort.is_set():
            raise _Aborted
        raise ModelFileError(
            f"llama.cpp {llama_cpp.__version__} could not load {spec.path}; check that it is "
            "a complete GGUF model of an architecture this llama.cpp supports"
        )
    threads = spec.n_threads or os.cpu_count() or 1
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = spec.n_ctx
    cparams.n_batch = cparams.n_ubatch = min(spec.n_batch, spec.n_ctx)
    cparams.n_seq_max = 1
    cparams.n_outputs_max = 1  # one logits row per batch: we only sample the last token
    cparams.n_threads = cparams.n_threads_batch = threads
    cparams.type_k = _kv_type(spec, spec.type_k)
    cparams.type_v = _kv_type(spec, spec.type_v)
    cparams.no_perf = True
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    if not ctx or abort.is_set():
        if ctx:
            llama_cpp.llama_free(ctx)
        llama_cpp.llama_model_free(model)
        _malloc_trim()
        if abort.is_set():
            raise _Aborted
        raise ModelFileError(
            f"llama.cpp could not create a context for {spec.path} (n_ctx={spec.n_ctx}, "
            f"n_batch={spec.n_batch}, KV {spec.type_k}/{spec.type_v}); lower n_ctx or change "
            "the KV types in the profile"
        )
    return model, ctx


def _tokenize(vocab: Any, text: str, *, special: bool = False) -> list[int]:
    """Token ids of ``text``, BOS added as the model wants; ``special``: special-token text
    (a chat template's ``<|im_start|>``) is parsed into those tokens."""
    data = text.encode()
    size = len(data) + 8
    while True:
        buf = (llama_cpp.llama_token * size)()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, size, True, special)
        if n >= 0:
            return list(buf[:n])
        size = -n


_COUNTERS: dict[str, _TokenCounter] = {}
_COUNTERS_LOCK = threading.Lock()


class _TokenCounter:
    """A vocab-only llama.cpp model used as a token counting function."""

    def __init__(self, path: str) -> None:
        _init_llama()
        mparams = llama_cpp.llama_model_default_params()
        mparams.vocab_only = True
        mparams.n_gpu_layers = 0
        self._model = llama_cpp.llama_model_load_from_file(path.encode(), mparams)
        if not self._model:
            raise ModelFileError(
                f"llama.cpp could not read the vocabulary of {path}; check that it is a "
                "complete GGUF model"
            )
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        weakref.finalize(self, llama_cpp.llama_model_free, self._model)

    def __call__(self, text: str) -> int:
        return len(_tokenize(self._vocab, text, special=True))

    def chat_format(self, template: str) -> ChatFormat:
        """``template`` with this vocabulary's BOS/EOS text and whether it adds BOS."""
        return ChatFormat(
            template=template,
            bos_token=self._text(llama_cpp.llama_vocab_bos(self._vocab)),
            eos_token=self._text(llama_cpp.llama_vocab_eos(self._vocab)),
            adds_bos=bool(llama_cpp.llama_vocab_get_add_bos(self._vocab)),
        )

    def _text(self, token: int) -> str:
        if token < 0:
            return ""
        raw = llama_cpp.llama_vocab_get_text(self._vocab, token)
        return raw.decode(errors="replace") if raw else ""


def _identity(spec: ModelSpec) -> str:
    stat = os.stat(spec.path)
    return (
        f"sha256={file_digest(spec.path)};size={stat.st_size};mtime_ns={stat.st_mtime_ns};"
        f"n_ctx={spec.n_ctx};kv={spec.type_k}/{spec.type_v};llama_cpp={llama_cpp.__version__}"
    )


class LlamaModel:
    """A model resident in llama.cpp (implements ``LoadedModel``): one context, one sequence.

    Generations on the same model are serialized by a lock (each waits for the previous one,
    still honouring cancellation while it waits).
    """

    def __init__(
        self,
        spec: ModelSpec,
        model: Any,
        ctx: Any,
        *,
        info: GGUFInfo,
        limiter: anyio.CapacityLimiter | None = None,
    ) -> None:
        self._spec = spec
        self._model: Any = model
        self._ctx: Any = ctx
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self._n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        self._n_ctx = min(int(llama_cpp.llama_n_ctx(ctx)), spec.n_ctx)  # llama.cpp pads it
        self._info = info
        self._limiter = limiter
        self._lock = threading.Lock()
        self._footprint = 0
        self._identity = ""

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
    def kv_identity(self) -> str:
        """File sha256 + size + mtime, ``n_ctx``, KV types and the llama-cpp-python version."""
        return self._identity

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
        """Blocking :meth:`tokenize`."""
        return _tokenize(self._vocab, text, special=special)

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
        """
        started = time.perf_counter()

        def work(abort: threading.Event) -> GenerationOutput:
            if not self._acquire(abort):
                raise _Aborted
            try:
                if self._ctx is None:
                    raise RuntimeError(f"model {self._spec.name} is closed")
                decoder = _Decoder(self, abort, on_token, started)
                return decoder.run(prompt, params, restore, save_at, save_final=save_final)
            finally:
                self._lock.release()

        return await run_in_worker(work, limiter=self._limiter)

    def _acquire(self, abort: threading.Event) -> bool:
        while not self._lock.acquire(timeout=0.05):
            if abort.is_set():
                return False
        return True

    async def close(self) -> None:
        """Free the model and its context in a worker thread. Idempotent.

        Waits for a running generation to finish first. Runs shielded: a cancelled caller
        still leaves the model freed.
        """
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.close_sync)

    def close_sync(self) -> None:
        """Blocking :meth:`close`."""
        with self._lock:
            if self._ctx is not None:
                llama_cpp.llama_free(self._ctx)
                self._ctx = None
            if self._model is not None:
                llama_cpp.llama_model_free(self._model)
                self._model = None
                _malloc_trim()
                log.info("model_close.done", model=self._spec.name)


class _Decoder:
    """One generation's decode loop (runs in the worker thread, holding the model lock)."""

    def __init__(
        self,
        model: LlamaModel,
        abort: threading.Event,
        on_token: Callable[[str], None] | None,
        started: float,
    ) -> None:
        self.m = model
        self.ctx = model._ctx
        self.abort = abort
        self.on_token = on_token
        self.started = started
        self.n_past = 0
        self.generated: list[int] = []  # sampled tokens decoded into the KV cache

    # -- KV state ------------------------------------------------------------------------

    def _clear(self) -> None:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
        self.n_past = 0

    def _restore(self, prompt: list[int], restore: PrefixState | None) -> int:
        """Restore ``restore`` and keep the part it shares with ``prompt``; the tokens kept.

        The state may hold more than the common prefix (a previous attempt's prompt and
        answer): the KV cells past it are dropped with ``llama_memory_seq_rm``. At most
        ``len(prompt) - 1`` tokens are kept (sampling needs the last prompt token's logits).
        With a sliding-window (SWA) cache, as Gemma 3 has, a truncated state may lack the
        window of cells the next token attends to (cells older than the window are reused
        by later tokens); then nothing is restored (full prefill), as llama.cpp's server
        does. Any failure leaves an empty cache and returns 0.
        """
        if restore is None or not restore.tokens or not prompt:
            return 0
        n = len(restore.tokens)
        keep = min(common_prefix_len(restore.tokens, prompt), len(prompt) - 1)
        if keep <= 0:
            return 0
        src = (ctypes.c_uint8 * len(restore.state)).from_buffer_copy(restore.state)
        if llama_cpp.llama_state_seq_set_data(self.ctx, src, len(restore.state), 0) == 0:
            log.warning("kv_restore.failed", model=self.m.spec.name, tokens=n)
            self._clear()
            return 0
        if keep < n:
            mem = llama_cpp.llama_get_memory(self.ctx)
            if not llama_cpp.llama_memory_seq_rm(mem, 0, keep, -1):
                log.warning("kv_restore.truncate_failed", model=self.m.spec.name, keep=keep)
                self._clear()
                return 0
            if not self._window_intact(keep):
                self._clear()
                return 0
        self.n_past = keep
        return keep

    def _window_intact(self, keep: int) -> bool:
        """After truncating to ``keep`` tokens, does the cache still hold every cell the
        next token attends to? Always for full attention; for a sliding window of ``n_swa``
        the oldest cell kept must be at or before ``keep - n_swa`` (llama.cpp's server
        uses the same bound before reusing a cache)."""
        n_swa = int(llama_cpp.llama_model_n_swa(self.m._model))
        if n_swa <= 0:
            return True
        pos_min = int(llama_cpp.llama_memory_seq_pos_min(llama_cpp.llama_get_memory(self.ctx), 0))
        if 0 <= pos_min <= max(0, keep - n_swa):
            return True
        log.info(
            "kv_restore.swa_window_lost", model=self.m.spec.name, keep=keep, pos_min=pos_min,
            n_swa=n_swa,
        )  # fmt: skip
        return False

    def _snapshot(self, tokens: list[int]) -> PrefixState:
        size = llama_cpp.llama_state_seq_get_size(self.ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        n = llama_cpp.llama_state_seq_get_data(self.ctx, buf, size, 0)
        return PrefixState(tokens=tuple(tokens), state=ctypes.string_at(buf, n))

    # -- evaluation ----------------------------------------------------------------------

    def _eval(self, tokens: list[int]) -> bool:
        """Evaluate ``tokens`` in n_batch chunks; False when the context is full."""
        step = self.m.spec.n_batch
        for i in range(0, len(tokens), step):
            if self.abort.is_set():
                raise _Aborted
            chunk = tokens[i : i + step]
            if self.n_past + len(chunk) > self.m._n_ctx:
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
        logits = np.ctypeslib.as_array(ptr, shape=(self.m._n_vocab,))
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

    def _emit(self, piece: str) -> None:
        if piece and self.on_token is not None:
            anyio.from_thread.run_sync(self.on_token, piece)

    # -- the loop ------------------------------------------------------------------------

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
        self._clear()
        restored = self._restore(prompt, restore)
        saved: PrefixState | None = None
        if save_at is not None:
            save_at = min(save_at, len(prompt))
            if restore is not None and save_at == restored == len(restore.tokens):
                saved = restore
        ok = True
        if saved is None and save_at is not None and save_at > self.n_past:
            ok = self._eval(prompt[self.n_past : save_at])
            if ok:
                saved = self._snapshot(prompt[:save_at])
        ok = ok and self._eval(prompt[self.n_past :])
        prefilled = time.perf_counter()
        prefill_tokens = len(prompt) - restored
        if not ok or not prompt:
            return self._output(
                text="", prompt=prompt, restored=restored, prefill_tokens=prefill_tokens,
                prefilled=prefilled, first=prefilled, count=0, reason="context", saved=saved,
            )  # fmt: skip
        text, count, reason, first = self._sample_loop(params)
        out = self._output(
            text=text, prompt=prompt, restored=restored, prefill_tokens=prefill_tokens,
            prefilled=prefilled, first=first, count=count, reason=reason, saved=saved,
        )  # fmt: skip
        if not save_final:
            return out
        final = self._final_state(prompt)
        return msgspec.structs.replace(out, final=final) if final is not None else out

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
            mem = llama_cpp.llama_get_memory(self.ctx)
            if not llama_cpp.llama_memory_seq_rm(mem, 0, len(prompt), -1):
                return None
            self.n_past = len(prompt)
            if answer and not self._eval(answer):
                return None
        return self._snapshot(prompt + answer)

    def _sample_loop(self, params: SamplingParams) -> tuple[str, int, StopReason, float]:
        rng = np.random.default_rng(params.seed)
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        stops = [s for s in params.stop if s]
        text, emitted, count = "", 0, 0
        first = time.perf_counter()
        reason: StopReason = "length"
        for i in range(params.max_tokens):
            if self.abort.is_set():
                raise _Aborted
            token = self._sample(params, rng)
            if i == 0:
                first = time.perf_counter()
            if llama_cpp.llama_vocab_is_eog(self.m._vocab, token):
                reason = "eos"
                break
            count += 1
            text += utf8.decode(_piece(self.m._vocab, token))
            cut = _find_stop(text, stops, emitted)
            if cut is not None:
                self._emit(text[emitted:cut])
                return text[:cut], count, "stop", first
            safe = len(text) - _held_back(text, stops)
            self._emit(text[emitted:safe])
            emitted = safe
            if i + 1 < params.max_tokens:
                if not self._eval([token]):
                    reason = "context"
                    break
                self.generated.append(token)
        text += utf8.decode(b"", final=True)
        cut = _find_stop(text, stops, emitted)
        if cut is not None:
            text, reason = text[:cut], "stop"
        self._emit(text[emitted:])
        return text, count, reason, first

    def _output(
        self,
        *,
        text: str,
        prompt: list[int],
        restored: int,
        prefill_tokens: int,
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
            prefill_tokens=prefill_tokens,
            prefill_s=prefilled - self.started,
            ttft_s=first - self.started,
            tokens=count,
            gen_s=end - first,
            stop_reason=reason,
        )
        return GenerationOutput(text=text, stats=stats, saved=saved)


def _piece(vocab: Any, token: int) -> bytes:
    """The bytes of one token (control tokens render as nothing)."""
    buf = ctypes.create_string_buffer(64)
    n = llama_cpp.llama_token_to_piece(vocab, token, buf, 64, 0, False)
    if n < 0:
        buf = ctypes.create_string_buffer(-n)
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, -n, 0, False)
    return buf.raw[:n]


def _find_stop(text: str, stops: list[str], emitted: int) -> int | None:
    """Index of the earliest stop sequence in ``text`` not entirely before ``emitted``."""
    longest = max((len(s) for s in stops), default=0)
    start = max(0, emitted - longest + 1)
    found = [i for s in stops if (i := text.find(s, start)) >= 0]
    return min(found) if found else None


def _held_back(text: str, stops: list[str]) -> int:
    """Length of the longest suffix of ``text`` that could begin a stop sequence."""
    best = 0
    for s in stops:
        for n in range(min(len(s) - 1, len(text)), best, -1):
            if s.startswith(text[-n:]):
                best = n
                break
    return best
