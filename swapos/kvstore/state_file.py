"""A prefix state's file on disk: its name, its layout, and reading one back verified
(blocking; the disk tier, :mod:`swapos.kvstore.disk`, calls these from a worker thread).

A file is named ``<n tokens>-<token hash>.kv`` and holds::

    MAGIC (8 bytes) | header length (u32 LE) | header (JSON) | tokens (int32 LE) | payload

The header holds the full identity, the token count and hash, the payload length and its
blake2b digest. A read verifies all of them against what the caller asked for and raises
:class:`Corrupt` with the reason for anything else under a state file's name: a link, a FIFO
or a device, a file larger than the tier's budget (refused from its size, never read),
a bad magic, header, token prefix or payload.
"""

from __future__ import annotations

import array
import errno
import hashlib
import os
import struct
import sys
from pathlib import Path
from typing import BinaryIO

import msgspec

from swapos.data.prefix import PrefixState
from swapos.regular_files import NotRegularFile, open_regular

MAGIC = b"SWAPKV01"
FORMAT_VERSION = 1
SUFFIX = ".kv"
MAX_HEADER = 1 << 20
LENGTH = struct.Struct("<I")
_HEX = "0123456789abcdef"


class Header(msgspec.Struct, frozen=True, kw_only=True):
    version: int
    identity: str
    n_tokens: int
    tokens_hash: str
    payload_len: int
    payload_hash: str


class Corrupt(Exception):
    """A file failed verification (the message says how)."""


def digest(data: bytes | memoryview, size: int = 16) -> str:
    return hashlib.blake2b(data, digest_size=size).hexdigest()


def token_bytes(tokens: list[int] | tuple[int, ...]) -> bytes:
    arr = array.array("i", tokens)
    if sys.byteorder == "big":
        arr.byteswap()
    return arr.tobytes()


def _tokens(raw: bytes | memoryview) -> tuple[int, ...]:
    arr = array.array("i", raw)
    if sys.byteorder == "big":
        arr.byteswap()
    return tuple(arr)


def file_name(n: int, packed: bytes) -> str:
    return f"{n:08d}-{digest(packed)}{SUFFIX}"


def parse_name(name: str) -> tuple[int, str] | None:
    """``(n_tokens, token hash)`` of a state file's name, or None for anything else."""
    if not name.endswith(SUFFIX) or name.startswith("."):
        return None
    n, _, token_hash = name[: -len(SUFFIX)].partition("-")
    if not (n.isascii() and n.isdigit()) or len(token_hash) != 32:
        return None  # int() reads other scripts' digits; a name of ours has ASCII ones
    if token_hash.strip(_HEX):
        return None
    return int(n), token_hash


def encode(identity: str, state: PrefixState) -> list[bytes]:
    """The parts of ``state``'s file, in order."""
    packed = token_bytes(state.tokens)
    head = msgspec.json.encode(
        Header(
            version=FORMAT_VERSION,
            identity=identity,
            n_tokens=len(state.tokens),
            tokens_hash=digest(packed),
            payload_len=len(state.state),
            payload_hash=digest(state.state, 32),
        )
    )
    return [MAGIC + LENGTH.pack(len(head)) + head, packed, state.state]


def open_state(path: Path, max_bytes: int) -> BinaryIO:
    """``path`` opened for reading if it is a regular file (not a link, a FIFO or a device)
    of at most ``max_bytes``.

    Raises:
        Corrupt: anything else under a state file's name.
        OSError: it could not be opened (FileNotFoundError: evicted meanwhile).
    """
    try:
        fd, info = open_regular(path, follow_links=False)
    except NotRegularFile:
        raise Corrupt("not a regular file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Corrupt("a symbolic link, not a state file") from None
        raise
    if info.st_size > max_bytes:
        os.close(fd)
        raise Corrupt(f"{info.st_size} bytes, over the disk budget of {max_bytes}")
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_tokens(path: Path, max_bytes: int) -> tuple[int, ...] | None:
    """The token prefix stored in ``path`` (its payload unchecked), or None if the file is
    unreadable or its tokens are not the ones its name hashes."""
    parsed = parse_name(path.name)
    if parsed is None:
        return None
    n, token_hash = parsed
    try:
        with open_state(path, max_bytes) as f:
            head = f.read(12)
            if len(head) < 12 or head[:8] != MAGIC:
                return None
            (hlen,) = LENGTH.unpack_from(head, 8)
            if hlen > MAX_HEADER:
                return None
            if msgspec.json.decode(f.read(hlen), type=Header).n_tokens != n:
                return None
            raw = f.read(4 * n)
    except (OSError, Corrupt, msgspec.DecodeError):
        return None
    if len(raw) != 4 * n or digest(raw) != token_hash:
        return None
    return _tokens(raw)


def read_state(path: Path, identity: str, packed: bytes, max_bytes: int) -> tuple[PrefixState, int]:
    """The state in ``path`` for exactly ``identity`` and the tokens ``packed``, verified,
    and the file's size.

    Raises:
        Corrupt: it is not that state (the message says why).
        OSError: it could not be read.
    """
    with open_state(path, max_bytes) as f:
        data = memoryview(f.read())
    if len(data) < 12:
        raise Corrupt(f"truncated ({len(data)} bytes)")
    if bytes(data[:8]) != MAGIC:
        raise Corrupt("not a SwapOS KV file (bad magic)")
    (hlen,) = LENGTH.unpack_from(data, 8)
    if hlen > MAX_HEADER or 12 + hlen > len(data):
        raise Corrupt("truncated header")
    try:
        head = msgspec.json.decode(data[12 : 12 + hlen], type=Header)
    except msgspec.DecodeError as exc:
        raise Corrupt(f"unreadable header ({exc})") from None
    if head.version != FORMAT_VERSION:
        raise Corrupt(f"format version {head.version}, expected {FORMAT_VERSION}")
    if head.identity != identity:
        raise Corrupt("belongs to another model identity")
    n = len(packed) // 4
    start = 12 + hlen
    if (
        head.n_tokens != n
        or head.tokens_hash != digest(packed)
        or data[start : start + 4 * n] != packed
    ):
        raise Corrupt("token prefix does not match")
    payload = data[start + 4 * n :]
    if len(payload) != head.payload_len:
        raise Corrupt(f"payload is {len(payload)} bytes, header says {head.payload_len}")
    if digest(payload, 32) != head.payload_hash:
        raise Corrupt("payload checksum mismatch")
    return PrefixState(tokens=_tokens(packed), state=bytes(payload)), len(data)
