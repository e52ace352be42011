"""Argument types shared by the command lines (``swapos.run``, ``swapos.bench``)."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An ``argparse`` type: a whole number >= 1 (``--max-attempts 0`` is refused, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
