"""KV state of a context's one sequence: clear, snapshot, restore (and truncate) a prefix.

The state is saved and restored per sequence (``llama_state_seq_*``), which copies only the
KV cells, not logits or scores.
"""

from __future__ import annotations

import ctypes
from typing import Any

import llama_cpp
import structlog

from swapos.data.prefix import PrefixState
from swapos.policies.tokens import common_prefix_len

log = structlog.get_logger(__name__)


def clear(ctx: Any) -> None:
    """Empty the KV cache."""
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)


def truncate(ctx: Any, keep: int) -> bool:
    """Drop the KV cells from position ``keep`` on; False if llama.cpp refuses."""
    return bool(llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), 0, keep, -1))


def snapshot(ctx: Any, tokens: list[int]) -> PrefixState:
    """The current KV state, which holds exactly ``tokens``.

    llama.cpp writes the state straight into a new ``bytes`` object (the C API's
    uninitialised ``PyBytes_FromStringAndSize(NULL, n)``, filled before anyone sees it),
    so saving a state of tens of MB costs one copy of it, not two."""
    size = llama_cpp.llama_state_seq_get_size(ctx, 0)
    data = _new_bytes(None, size)
    n = llama_cpp.llama_state_seq_get_data(ctx, _pointer(data), size, 0)
    return PrefixState(tokens=tuple(tokens), state=data if n == size else data[:n])


_new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
_new_bytes.restype = ctypes.py_object
_new_bytes.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)


def _pointer(data: bytes) -> Any:
    """A ``uint8_t *`` to ``data``'s own buffer (no copy)."""
    return ctypes.cast(ctypes.c_char_p(data), ctypes.POINTER(ctypes.c_uint8))


def restore(ctx: Any, model: Any, name: str, prompt: list[int], state: PrefixState | None) -> int:
    """Restore ``state`` and keep the part it shares with ``prompt``; the tokens kept.

    The state may hold more than the common prefix (a previous attempt's prompt and
    answer): the KV cells past it are dropped with ``llama_memory_seq_rm``. At most
    ``len(prompt) - 1`` tokens are kept (sampling needs the last prompt token's logits).
    With a sliding-window (SWA) cache, as Gemma 3 has, a truncated state may lack the
    window of cells the next token attends to (cells older than the window are reused
    by later tokens); then nothing is restored (full prefill), as llama.cpp's server
    does. Any failure leaves an empty cache and returns 0.
    """
    if state is None or not state.tokens or not prompt:
        return 0
    n = len(state.tokens)
    keep = min(common_prefix_len(state.tokens, prompt), len(prompt) - 1)
    if keep <= 0:
        return 0
    if llama_cpp.llama_state_seq_set_data(ctx, _pointer(state.state), len(state.state), 0) == 0:
        log.warning("kv_restore.failed", model=name, tokens=n)
        clear(ctx)
        return 0
    if keep < n:
        if not truncate(ctx, keep):
            log.warning("kv_restore.truncate_failed", model=name, keep=keep)
            clear(ctx)
            return 0
        if not _window_intact(ctx, model, name, keep):
            clear(ctx)
            return 0
    return keep


def _window_intact(ctx: Any, model: Any, name: str, keep: int) -> bool:
    """After truncating to ``keep`` tokens, does the cache still hold every cell the next
    token attends to? Always for full attention; for a sliding window of ``n_swa`` the
    oldest cell kept must be at or before ``keep - n_swa`` (llama.cpp's server uses the same
    bound before reusing a cache)."""
    n_swa = int(llama_cpp.llama_model_n_swa(model))
    if n_swa <= 0:
        return True
    pos_min = int(llama_cpp.llama_memory_seq_pos_min(llama_cpp.llama_get_memory(ctx), 0))
    if 0 <= pos_min <= max(0, keep - n_swa):
        return True
    log.info("kv_restore.swa_window_lost", model=name, keep=keep, pos_min=pos_min, n_swa=n_swa)
    return False
