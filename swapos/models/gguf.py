"""A small pure-Python reader of GGUF headers: what a model is, without loading it.

Reads the magic, version, metadata key/values and tensor infos of a GGUF file (v2 and v3,
little-endian) through a read-only ``mmap``, so only the header pages are touched. Large
arrays (the 262k-entry Gemma vocabulary) are skipped, not materialized: only their length is
kept. The tensor infos give the size the tensor data must have, so a truncated file is
caught here instead of deep inside llama.cpp.
"""

from __future__ import annotations

import errno
import hashlib
import mmap
import os
import struct
from pathlib import Path

import msgspec

from swapos.errors import ModelFileError
from swapos.regular_files import NotRegularFile, open_regular

GGUF_MAGIC = b"GGUF"

# Value types of GGUF metadata (gguf.h: enum gguf_type).
_UINT8, _INT8, _UINT16, _INT16, _UINT32, _INT32, _FLOAT32, _BOOL = range(8)
_STRING, _ARRAY, _UINT64, _INT64, _FLOAT64 = 8, 9, 10, 11, 12
_TOKEN_TABLE = "tokenizer.ggml.tokens"
_SCALARS: dict[int, struct.Struct] = {
    _UINT8: struct.Struct("<B"), _INT8: struct.Struct("<b"),
    _UINT16: struct.Struct("<H"), _INT16: struct.Struct("<h"),
    _UINT32: struct.Struct("<I"), _INT32: struct.Struct("<i"),
    _FLOAT32: struct.Struct("<f"), _BOOL: struct.Struct("<?"),
    _UINT64: struct.Struct("<Q"), _INT64: struct.Struct("<q"),
    _FLOAT64: struct.Struct("<d"),
}  # fmt: skip
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

# ggml tensor types: type id -> (elements per block, bytes per block).
_GGML_BLOCKS: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
    8: (32, 34), 9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144),
    13: (256, 176), 14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74),
    18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82),
    23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8),
    29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66), 39: (32, 17),
}  # fmt: skip

MetaValue = int | float | bool | str


class GGUFInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a GGUF header says about a model.

    Attributes:
        path: the file.
        file_size: its size in bytes.
        version: GGUF version (2 or 3).
        tensor_count: number of tensors.
        data_offset: where the tensor data starts.
        data_size: bytes of tensor data the tensor infos require (end of the last tensor).
        architecture: ``general.architecture`` (e.g. ``"gemma3"``).
        block_count: transformer layers.
        embedding_length: hidden size.
        head_count: attention heads.
        head_count_kv: KV heads (``head_count`` when the file does not say).
        key_length: per-head key size (``embedding_length // head_count`` by default).
        value_length: per-head value size (``key_length`` by default).
        context_length: training context length.
        vocab_size: entries of ``tokenizer.ggml.tokens``.
        token_table_digest: sha256 of the ``tokenizer.ggml.tokens`` array as stored (every
            token's text in id order; "" without one): two models with the same digest
            share their vocabulary, so one may draft for the other.
        metadata: every scalar or string metadata value (arrays are left out).
    """

    path: str
    file_size: int
    version: int
    tensor_count: int
    data_offset: int
    data_size: int
    architecture: str
    block_count: int
    embedding_length: int
    head_count: int
    head_count_kv: int
    key_length: int
    value_length: int
    context_length: int
    vocab_size: int
    token_table_digest: str = ""
    metadata: dict[str, MetaValue]


class _Truncated(Exception):
    """The header ends before it should."""


class _Corrupt(Exception):
    """A header field holds a value no valid GGUF file has (the message says which)."""


_MAX_ARRAY_DEPTH = 8  # llama.cpp itself reads no nested arrays; gguf-py writes at most a few
_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_ALIGNMENT = 1 << 30


class _Cursor:
    """Sequential little-endian reads over a buffer."""

    def __init__(self, buf: mmap.mmap | bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, fmt: struct.Struct) -> int | float | bool:
        if self.pos + fmt.size > len(self.buf):
            raise _Truncated
        (value,) = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return value  # type: ignore[no-any-return]

    def u32(self) -> int:
        return int(self.take(_U32))

    def u64(self) -> int:
        return int(self.take(_U64))

    def skip(self, n: int) -> None:
        if self.pos + n > len(self.buf):
            raise _Truncated
        self.pos += n

    def string(self) -> str:
        n = self.u64()
        start = self.pos
        self.skip(n)
        return bytes(self.buf[start : self.pos]).decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        self.skip(self.u64())

    def count(self, n: int, min_size: int, what: str) -> int:
        """``n`` items of at least ``min_size`` bytes each must fit in what is left (so a
        crafted count fails at once instead of looping over the rest of a large file)."""
        if n * min_size > len(self.buf) - self.pos:
            raise _Truncated(what)
        return n


def _value(cur: _Cursor, vtype: int, depth: int = 0) -> MetaValue | int:
    """Read one value; an array yields its length (its elements are skipped).

    Nested arrays are read at most ``_MAX_ARRAY_DEPTH`` deep (deeper is :class:`_Corrupt`),
    so a crafted header cannot exhaust the stack.
    """
    if vtype == _STRING:
        return cur.string()
    if vtype == _ARRAY:
        if depth >= _MAX_ARRAY_DEPTH:
            raise _Corrupt(f"metadata arrays nested more than {_MAX_ARRAY_DEPTH} deep")
        etype, count = cur.u32(), cur.u64()
        if etype in _SCALARS:
            cur.skip(_SCALARS[etype].size * count)
        elif etype == _STRING:
            for _ in range(cur.count(count, 8, "strings")):
                cur.skip_string()
        elif etype == _ARRAY:  # nested arrays: rare, read them one by one
            for _ in range(cur.count(count, 12, "arrays")):
                _value(cur, etype, depth + 1)
        else:
            raise _Corrupt(f"unknown metadata array element type {etype}")
        return count
    fmt = _SCALARS.get(vtype)
    if fmt is None:
        raise _Corrupt(f"unknown metadata value type {vtype}")
    return cur.take(fmt)


def _alignment(metadata: dict[str, MetaValue]) -> int:
    """``general.alignment``: a power of two (llama.cpp's rule), 32 when absent."""
    value = metadata.get("general.alignment", 32)
    ok = type(value) is int and 0 < value <= _MAX_ALIGNMENT and value & (value - 1) == 0
    if not ok:
        raise _Corrupt(f"general.alignment is {value!r}, not a power of two")
    return int(value)


def _tensor_bytes(dims: list[int], ggml_type: int) -> int:
    block = _GGML_BLOCKS.get(ggml_type)
    if block is None:
        return 0  # unknown type: only the offset bounds the data
    elems = 1
    for d in dims:
        elems *= d
    per, size = block
    return (elems + per - 1) // per * size


def _parse(buf: mmap.mmap | bytes, path: Path, file_size: int) -> GGUFInfo:
    cur = _Cursor(buf)
    if bytes(buf[:4]) != GGUF_MAGIC:
        raise ModelFileError(
            f"{path} is not a GGUF file (bad magic); give a .gguf model file "
            "(re-download it if it should be one)"
        )
    cur.skip(4)
    version = cur.u32()
    if version not in (2, 3):
        raise ModelFileError(
            f"{path} is GGUF version {version}; only versions 2 and 3 are supported, "
            "re-convert the model with a current llama.cpp"
        )
    tensor_count, kv_count = cur.u64(), cur.u64()
    cur.count(kv_count, 12, "metadata")  # key length + value type, at the least
    cur.count(tensor_count, 24, "tensor infos")  # name length, dims, type, offset
    metadata: dict[str, MetaValue] = {}
    arrays: dict[str, int] = {}
    token_table = ""
    for _ in range(kv_count):
        key = cur.string()
        vtype = cur.u32()
        start = cur.pos
        value = _value(cur, vtype)
        if vtype == _ARRAY:
            arrays[key] = int(value)
            if key == _TOKEN_TABLE:
                token_table = hashlib.sha256(buf[start : cur.pos]).hexdigest()
        else:
            metadata[key] = value
    data_end = 0
    for _ in range(tensor_count):
        cur.skip_string()
        n_dims = cur.u32()
        if n_dims > _MAX_DIMS:
            raise _Corrupt(f"a tensor has {n_dims} dimensions (at most {_MAX_DIMS})")
        dims = [cur.u64() for _ in range(n_dims)]
        ggml_type, offset = cur.u32(), cur.u64()
        data_end = max(data_end, offset + _tensor_bytes(dims, ggml_type))
    alignment = _alignment(metadata)
    data_offset = (cur.pos + alignment - 1) // alignment * alignment
    return _info(
        path=path, file_size=file_size, version=version, tensor_count=tensor_count,
        data_offset=data_offset, data_size=data_end, meta=metadata, arrays=arrays,
        token_table=token_table,
    )  # fmt: skip


def _info(
    *,
    path: Path,
    file_size: int,
    version: int,
    tensor_count: int,
    data_offset: int,
    data_size: int,
    meta: dict[str, MetaValue],
    arrays: dict[str, int],
    token_table: str = "",
) -> GGUFInfo:
    arch = str(meta.get("general.architecture", ""))

    def num(key: str, default: int = 0) -> int:
        """A size field: a non-negative integer (a float only if it is a whole number)."""
        value = meta.get(f"{arch}.{key}", default)
        if isinstance(value, float) and value.is_integer() and 0 <= value < 2**63:
            value = int(value)
        if not isinstance(value, int):
            if isinstance(value, float):
                raise _Corrupt(f"{arch}.{key} is {value!r}, not a whole number")
            return default
        if value < 0:
            raise _Corrupt(f"{arch}.{key} is negative ({value})")
        return value

    heads = num("attention.head_count", 1) or 1
    key_len = num("attention.key_length", num("embedding_length") // heads)
    return GGUFInfo(
        path=str(path),
        file_size=file_size,
        version=version,
        tensor_count=tensor_count,
        data_offset=data_offset,
        data_size=data_size,
        architecture=arch,
        block_count=num("block_count"),
        embedding_length=num("embedding_length"),
        head_count=heads,
        head_count_kv=num("attention.head_count_kv", heads),
        key_length=key_len,
        value_length=num("attention.value_length", key_len),
        context_length=num("context_length"),
        vocab_size=arrays.get(_TOKEN_TABLE, 0),
        token_table_digest=token_table,
        metadata=meta,
    )


def open_model_file(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor of the model file at ``path`` if it is a regular file, opened
    without blocking (:func:`~swapos.regular_files.open_regular`). The caller closes it.

    Raises:
        OSError: it cannot be opened (missing, a link loop, no permission).
        ModelFileError: it is a folder, a FIFO, a device or a socket (named, with what to do).
    """
    try:
        fd, _ = open_regular(path)
    except NotRegularFile as exc:
        raise ModelFileError(
            f"{os.fspath(path)} is {exc.kind}, not a model file; give a .gguf model file instead"
        ) from None
    return fd


def _missing(file: Path) -> str:
    """What to say of ``file`` that cannot be found: a link names where it points."""
    if file.is_symlink():
        return (
            f"{file} is a link to {os.readlink(file)}, which does not exist; fix or remove the link"
        )
    return f"model file {file} does not exist; check the path"


def read_gguf(path: str | os.PathLike[str]) -> GGUFInfo:
    """Read the header and metadata of the GGUF file at ``path``.

    Raises:
        ModelFileError: the file is missing, unreadable, not a regular file, not GGUF, or
            truncated (its header or its tensor data ends early). The message names the
            file and what to do.
    """
    file = Path(path)
    try:
        with open(open_model_file(file), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 24:
                raise ModelFileError(
                    f"{file} is too small to be a GGUF model ({size} bytes); "
                    "it is truncated or not a model: re-download or re-assemble it"
                )
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                info = _parse(buf, file, size)
    except FileNotFoundError as exc:
        raise ModelFileError(_missing(file)) from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ModelFileError(f"{file} is a link loop; fix or remove the link") from exc
        raise ModelFileError(
            f"cannot read model file {file}: {exc.strerror}; give a readable .gguf model file"
        ) from exc
    except _Corrupt as exc:
        raise ModelFileError(
            f"{file} has a corrupt GGUF header ({exc}); re-download or re-convert it"
        ) from exc
    except (_Truncated, ArithmeticError, ValueError, TypeError, RecursionError) as exc:
        # Anything else a malformed header can provoke in the arithmetic above is the same
        # class of error: the file, not the program, is wrong.
        raise ModelFileError(
            f"{file} has a truncated or corrupt GGUF header; re-download or re-assemble it"
        ) from exc
    if info.data_offset + info.data_size > size:
        raise ModelFileError(
            f"{file} is truncated: its tensors need {info.data_offset + info.data_size} bytes "
            f"but the file has {size}; re-download or re-assemble it"
        )
    return info
