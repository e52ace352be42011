"""Reading and decoding request bodies: size-limited, validated by msgspec."""

from __future__ import annotations

from typing import TypeVar

import msgspec
from starlette.requests import Request

from swapos.serve.errors import RequestError

T = TypeVar("T")


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 beyond ``limit`` bytes (declared or sent)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise RequestError(
            413, f"request body of {declared} bytes exceeds the limit of {limit} bytes"
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestError(413, f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def decode(body: bytes, kind: type[T]) -> T:
    """``body`` as ``kind``; malformed JSON, a wrong shape or nesting deeper than the
    decoder goes is a 400 naming the problem."""
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as exc:
        raise RequestError(400, f"invalid request: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise RequestError(400, f"malformed JSON in the request body: {exc}") from exc
    except RecursionError as exc:
        raise RequestError(
            400, "the request body's JSON is nested too deeply; send a flatter body"
        ) from exc
