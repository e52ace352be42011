"""KV state of one sequence of a context: clear, snapshot, restore (and truncate) a prefix.

The state is saved and restored per sequence (``llama_state_seq_*``), which copies only the
KV cells, not logits or scores. ``seq`` is the sequence: a model's own context has one
(0, and ``None`` clears the whole cache); a context with slots has one per slot
(``backends/llama/slots.py``).
"""

from __future__ import annotations

import ctypes
from typing import Any

import llama_cpp
import structlog

from swapos.data.prefix import PrefixState
from swapos.policies.tokens import common_prefix_len

log = structlog.get_logger(__name__)


def clear(ctx: Any, seq: int | None = None) -> None:
    """Empty the KV cache (``seq`` None), or drop every cell of sequence ``seq``."""
    mem = llama_cpp.llama_get_memory(ctx)
    if seq is None:
        llama_cpp.llama_memory_clear(mem, True)
    else:
        llama_cpp.llama_memory_seq_rm(mem, seq, -1, -1)


def truncate(ctx: Any, keep: int, seq: int = 0) -> bool:
    """Drop the KV cells of ``seq`` from position ``keep`` on; False if llama.cpp refuses."""
    return bool(llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), seq, keep, -1))


def snapshot(ctx: Any, tokens: list[int], seq: int = 0) -> PrefixState:
    """The current KV state, which holds exactly ``tokens``.

    llama.cpp writes the state straight into a new ``bytes`` object (the C API's
    uninitialised ``PyBytes_FromStringAndSize(NULL, n)``, filled before anyone sees it),
    so saving a state of tens of MB costs one copy of it, not two."""
    size = llama_cpp.llama_state_seq_get_size(ctx, seq)
    data = _new_bytes(None, size)
    n = llama_cpp.llama_state_seq_get_data(ctx, _pointer(data), size, seq)
    return PrefixState(tokens=tuple(tokens), state=data if n == size else data[:n])


_new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
_new_bytes.restype = ctypes.py_object
_new_bytes.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)


def _pointer(data: bytes) -> Any:
    """A ``uint8_t *`` to ``data``'s own buffer (no copy)."""
    return ctypes.cast(ctypes.c_char_p(data), ctypes.POINTER(ctypes.c_uint8))


def restore(
    ctx: Any,
    model: Any,
    name: str,
    prompt: list[int],
    state: PrefixState | None,
    *,
    seq: int | None = None,
) -> int:
    """Restore ``state`` and keep the part it shares with ``prompt``; the tokens kept.

    The state may hold more than the common prefix (a previous attempt's prompt and
    answer): the KV cells past it are dropped with ``llama_memory_seq_rm``. At most
    ``len(prompt) - 1`` tokens are kept (sampling needs the last prompt token's logits).
    With a sliding-window (SWA) cache, as Gemma 3 has, a truncated state may lack the
    window of cells the next token attends to (cells older than the window are reused
    by later tokens); then nothing is restored (full prefill), as llama.cpp's server
    does. Any failure leaves an empty cache (of ``seq``: see :func:`clear`) and returns 0.
    """
    if state is None or not state.tokens or not prompt:
        return 0
    n = len(state.tokens)
    keep = min(common_prefix_len(state.tokens, prompt), len(prompt) - 1)
    if keep <= 0:
        return 0
    into = seq or 0
    if llama_cpp.llama_state_seq_set_data(ctx, _pointer(state.state), len(state.state), into) == 0:
        log.warning("kv_restore.failed", model=name, tokens=n)
        clear(ctx, seq)
        return 0
    if keep < n:
        if not truncate(ctx, keep, into):
            log.warning("kv_restore.truncate_failed", model=name, keep=keep)
            clear(ctx, seq)
            return 0
        if not _window_intact(ctx, model, name, keep, into):
            clear(ctx, seq)
            return 0
    return keep


def _window_intact(ctx: Any, model: Any, name: str, keep: int, seq: int = 0) -> bool:
    """After truncating to ``keep`` tokens, does the cache still hold every cell the next
    token attends to? Always for full attention; for a sliding window of ``n_swa`` the
    oldest cell kept must be at or before ``keep - n_swa`` (llama.cpp's server uses the same
    bound before reusing a cache)."""
    n_swa = int(llama_cpp.llama_model_n_swa(model))
    if n_swa <= 0:
        return True
    pos_min = int(llama_cpp.llama_memory_seq_pos_min(llama_cpp.llama_get_memory(ctx), seq))
    if 0 <= pos_min <= max(0, keep - n_swa):
        return True
    log.info("kv_restore.swa_window_lost", model=name, keep=keep, pos_min=pos_min, n_swa=n_swa)
    return False
