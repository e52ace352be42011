"""Process-wide llama.cpp setup: backend init, its log routed to structlog, heap trimming."""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any

import llama_cpp
import structlog

log = structlog.get_logger(__name__)

_init_lock = threading.Lock()


class Aborted(Exception):
    """The worker saw the abort flag; the cancellation that set it is re-raised by anyio."""


def init_llama() -> None:
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
