"""Logging setup. Only entry points (``python -m swapos.run``, ``swapos.bench``) call this;
the library itself only calls ``structlog.get_logger``."""

from __future__ import annotations

import logging
import sys
from typing import TextIO, cast

import structlog


class _CurrentStderr:
    """``sys.stderr`` as it is at each write, not as it was at configuration: whoever swaps
    it (pytest's capture, an embedding application) gets the log lines, and a logger cached
    on first use never writes to a stream closed since."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(verbosity: int = 0) -> None:
    """Human-readable structlog output on stderr: warnings by default, ``-v`` info,
    ``-vv`` debug."""
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%H:%M:%S"),
            structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, _CurrentStderr())),
        cache_logger_on_first_use=True,
    )
