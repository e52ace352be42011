"""How much memory a llama.cpp model holds once loaded: a pure estimate, before loading.

The Evictor needs a number before a model is loaded; the llama backend later replaces it with
the measured RSS delta. See :func:`estimate_footprint` for the model and its measured error.
"""

from __future__ import annotations

from typing import Protocol

# KV cache element types: name -> (ggml type id, bytes per element).
KV_TYPES: dict[str, tuple[int, float]] = {
    "f32": (0, 4.0),
    "f16": (1, 2.0),
    "bf16": (30, 2.0),
    "q8_0": (8, 34 / 32),
    "q5_1": (7, 24 / 32),
    "q5_0": (6, 22 / 32),
    "q4_1": (3, 20 / 32),
    "q4_0": (2, 18 / 32),
    "iq4_nl": (20, 18 / 32),
}

# Calibration (see estimate_footprint): fixed runtime overhead and compute buffer growth.
_FIXED = 50 << 20
_COMPUTE_PER_BATCH_TOKEN_PER_EMBD = 54  # bytes per (batch token x embedding unit)

#: Relative error of :func:`estimate_footprint` the tests hold it to.
TOLERANCE = 0.05


class ModelShape(Protocol):
    """The GGUF metadata the estimate needs (``swapos.models.gguf.GGUFInfo`` has it)."""

    @property
    def block_count(self) -> int: ...
    @property
    def embedding_length(self) -> int: ...
    @property
    def head_count(self) -> int: ...
    @property
    def head_count_kv(self) -> int: ...
    @property
    def key_length(self) -> int: ...
    @property
    def value_length(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...


def kv_cache_bytes(meta: ModelShape, *, n_ctx: int, type_k: str, type_v: str) -> int:
    """Bytes of the KV cache: every layer keeps ``n_ctx`` cells (llama.cpp's ``swa_full``)."""
    k = meta.head_count_kv * meta.key_length * KV_TYPES[type_k][1]
    v = meta.head_count_kv * meta.value_length * KV_TYPES[type_v][1]
    return int(n_ctx * meta.block_count * (k + v))


def estimate_footprint(
    file_size: int,
    meta: ModelShape,
    *,
    n_ctx: int,
    n_batch: int,
    type_k: str = "f16",
    type_v: str = "f16",
    gpu_layers: int = 0,
) -> int:
    """Estimated resident (host) bytes of a loaded model after its first generation.

    weights (the file: mmap'd, and all of it is touched by the first eval, since Gemma ties
    its output head to the token embedding) + KV cache (``n_ctx x n_layer x n_head_kv x
    (key_len + val_len)`` elements, every layer full-size) + output buffer (one ``n_vocab``
    float32 row: the llama backend asks for one output per batch and keeps no
    ``n_batch x n_vocab`` scores array) + compute buffer (grows with ``n_batch`` times the
    embedding width; flash attention keeps it independent of ``n_ctx``) + a fixed runtime
    overhead (ggml/llama.cpp state, thread pools, tokenizer tables).

    Args:
        file_size: GGUF file size in bytes.
        meta: the model's shape from its GGUF header.
        n_ctx: context length.
        n_batch: batch (= micro-batch) size.
        type_k: KV key type (a key of :data:`KV_TYPES`).
        type_v: KV value type.
        gpu_layers: layers offloaded to a GPU (llama.cpp's ``n_gpu_layers``, -1: all):
            their share of the weights and of the KV cache is on the device instead
            (:func:`estimate_device_footprint`); llama.cpp unmaps the offloaded tensors'
            pages once they are uploaded.

    Raises:
        KeyError: an unknown KV type.

    Calibration: RSS delta from before the load to after a 394-token prompt and 16
    generated tokens (llama-cpp-python 0.3.36, CPU, flash attention auto, KV f16/f16),
    measured vs estimated in MiB:

    ==========  =======  =====  ========  =========
    model       n_batch  n_ctx  measured  estimated
    ==========  =======  =====  ========  =========
    Q4_K_M      64       2048   339.8     330.5
    Q8_0        64       2048   363.2     367.1
    F16         64       2048   602.3     606.8
    Q8_0        512      2048   377.7     382.0
    Q8_0        64       512    335.5     340.1
    Q8_0        64       8192   471.9     475.1
    ==========  =======  =====  ========  =========

    Error within 3% on all of them (:data:`TOLERANCE` is 5%). The fixed term is fitted on
    Gemma 3 270M; for much larger models it is a small share of the total.
    """
    kv = kv_cache_bytes(meta, n_ctx=n_ctx, type_k=type_k, type_v=type_v)
    output = 4 * meta.vocab_size
    compute = n_batch * _COMPUTE_PER_BATCH_TOKEN_PER_EMBD * meta.embedding_length
    host = 1.0 - offload_share(meta.block_count, gpu_layers)
    return int(host * (file_size + kv) + output + compute + _FIXED)


def offload_share(block_count: int, gpu_layers: int) -> float:
    """The share of a model's layers on the GPU: ``gpu_layers`` of ``block_count`` (-1 or
    more than there are: all of them)."""
    if gpu_layers == 0 or block_count <= 0:
        return 0.0
    if gpu_layers < 0 or gpu_layers >= block_count:
        return 1.0
    return gpu_layers / block_count


def estimate_device_footprint(
    file_size: int,
    meta: ModelShape,
    *,
    n_ctx: int,
    n_batch: int,
    type_k: str = "f16",
    type_v: str = "f16",
    gpu_layers: int = 0,
) -> int:
    """Estimated GPU bytes of a model with ``gpu_layers`` offloaded (0 when none are).

    The offloaded share of the weights (layers are of one size, so the share of the file)
    and of the KV cache (the KV cache of a layer lives where the layer is), plus the
    device's compute buffer, sized as the host's (:func:`estimate_footprint`). Not
    calibrated on a GPU here (these machines have none): the Loader replaces it by the
    measured change in the device's used memory after the first load, as it does the host
    estimate. The CUDA/Metal runtime's own per-process memory is not a model's: the
    ``device_budget = "auto"`` margin leaves room for it.
    """
    share = offload_share(meta.block_count, gpu_layers)
    if share == 0.0:
        return 0
    kv = kv_cache_bytes(meta, n_ctx=n_ctx, type_k=type_k, type_v=type_v)
    compute = n_batch * _COMPUTE_PER_BATCH_TOKEN_PER_EMBD * meta.embedding_length
    return int(share * (file_size + kv) + compute)
