"""Process-wide llama.cpp setup: backend init, its log routed to structlog, heap trimming."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import re
import threading
from collections.abc import Iterator
from typing import Any

import llama_cpp
import structlog

log = structlog.get_logger(__name__)

_init_lock = threading.Lock()


class Aborted(Exception):
    """The worker saw the abort flag; the cancellation that set it is re-raised by anyio."""


def acquire_unless_aborted(lock: threading.Lock, abort: threading.Event) -> bool:
    """Wait for ``lock`` (a model's), checking ``abort`` every 50 ms; False if it was set."""
    while not lock.acquire(timeout=0.05):
        if abort.is_set():
            return False
    return True


def init_llama() -> None:
    """Initialize the backend once and keep llama.cpp's log lines off stderr."""
    with _init_lock:
        _init_once()


@functools.cache
def _init_once() -> None:
    llama_cpp.llama_backend_init()
    llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))


_ASSIGNED = re.compile(rb"layer\s+(\d+) assigned to device (\S+?),")
_reports = threading.local()


@contextlib.contextmanager
def layer_report() -> Iterator[dict[int, str]]:
    """Collect, while a model loads in this thread, where llama.cpp says each layer went
    (its ``load_tensors: layer N assigned to device X`` log lines): ``{layer: device}``."""
    report: dict[int, str] = {}
    _reports.current = report
    try:
        yield report
    finally:
        _reports.current = None


@llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
def _log_callback(level: int, text: bytes, _data: Any) -> None:
    """Route llama.cpp's errors to structlog; note layer placements (:func:`layer_report`);
    drop the rest of its chatter."""
    if level == 4:  # GGML_LOG_LEVEL_ERROR (ggml: NONE, DEBUG, INFO, WARN, ERROR, CONT)
        log.warning("llama_cpp.log", text=text.decode(errors="replace").rstrip())
    report = getattr(_reports, "current", None)
    if report is not None and (match := _ASSIGNED.search(text)):
        report[int(match.group(1))] = match.group(2).decode(errors="replace")
