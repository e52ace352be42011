"""Logging setup. Only entry points (``python -m swapos.run``, ``swapos.bench``) call this;
the library itself only calls ``structlog.get_logger``."""

from __future__ import annotations

import logging
import sys

import structlog


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
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
