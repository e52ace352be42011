"""Backend exceptions mapped to SwapOS errors at the backend's edge.

llama-cpp-python reports failures as plain Python exceptions (``RuntimeError`` from a failed
``llama_decode``, ``OSError``/``ValueError``/``ctypes.ArgumentError`` from the C bindings).
Past the backend nobody could tell those from bugs, so each backend entry point maps them
here, once, into the :class:`~swapos.errors.SwapOSError` that names what failed. Actors then
turn that error into a ``*Failed`` reply with the reason, and the system keeps serving.
Exceptions not named in the mapping (a ``KeyError``, an ``AssertionError``: bugs) and
cancellation pass through unchanged.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator, Mapping

from swapos.errors import SwapOSError

LIBRARY_ERRORS: tuple[type[Exception], ...] = (
    RuntimeError,
    OSError,
    ValueError,
    MemoryError,
    ctypes.ArgumentError,
)
"""What a native library call can raise that is the library's failure, not ours."""


ExceptionTypes = type[Exception] | tuple[type[Exception], ...]
"""What an ``except`` clause accepts: one exception type or a tuple of them."""


@contextlib.contextmanager
def map_exceptions(
    mapping: Mapping[ExceptionTypes, type[SwapOSError]],
    what: str,
    *,
    advice: str = "",
) -> Iterator[None]:
    """Re-raise an exception matching a key of ``mapping`` as its value.

    Args:
        mapping: exception types (or tuples of them) to the SwapOS error each becomes;
            the first match wins.
        what: what was being done, for the message (``"generating with model 'coder'"``).
        advice: what to do next, appended to the message.

    The new error's message is ``"{what} failed: {original}; {advice}"`` and its
    ``__cause__`` is the original exception. A :class:`SwapOSError` passes unchanged.
    """
    try:
        yield
    except SwapOSError:
        raise
    except Exception as exc:
        for source, target in mapping.items():
            if isinstance(exc, source):
                detail = str(exc) or type(exc).__name__
                message = f"{what} failed: {detail}" + (f"; {advice}" if advice else "")
                raise target(message) from exc
        raise
