"""The flat exception hierarchy of SwapOS.

Every error a user can cause (a bad profile, a missing model file, a broken task) is a
:class:`SwapOSError` whose message says what went wrong *and what to do next*. Bugs are not
wrapped: they surface as the exception they are.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class SwapOSError(Exception):
    """Base class of every error SwapOS raises on purpose."""


class ProfileError(SwapOSError):
    """A profile file is missing, malformed, or names a field or value that is not allowed."""


class ModelFileError(SwapOSError):
    """A model file is missing, truncated, or not a GGUF file llama.cpp can load."""


class TaskError(SwapOSError):
    """A task folder does not follow the task format (docs/tasks.md)."""


class SystemClosedError(SwapOSError):
    """The actor system was used after it shut down (or while it was shutting down)."""


class EventLogError(SwapOSError):
    """An event log or results file cannot be read (corrupt, or from a newer schema)."""


class GenerationError(SwapOSError):
    """A generation could not run (prompt longer than the context, a backend failure)."""


class CapsuleError(SwapOSError, ValueError):
    """A capsule cannot be decoded, or cannot be rendered within its token budget (still a
    ``ValueError``, as it was before it joined this hierarchy)."""


class TemplateError(SwapOSError, ValueError):
    """A chat template that cannot be compiled or rendered (the message says which; still a
    ``ValueError``, as it was before it joined this hierarchy)."""


@contextlib.contextmanager
def one_error() -> Iterator[None]:
    """Re-raise the single exception of an exception group raised in the block (a task
    group's body or child failed alone) as itself, not wrapped; a group of several stays a
    group. For blocks whose other tasks only ever end by cancellation, so a caller sees
    the error it would see without the task group."""
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
