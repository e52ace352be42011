"""A malformed GGUF header is one ``ModelFileError`` line, never another exception.

Each class the hostile-input review found (issue 28) has a crafted case here, and hypothesis
fuzzes the header reader with random, mutated and structurally generated headers.
"""

from __future__ import annotations

import struct
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swapos.errors import ModelFileError
from swapos.models.gguf import read_gguf
from tests.test_gguf_footprint import tiny_gguf

FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _str(s: str) -> bytes:
    return struct.pack("<Q", len(s)) + s.encode()


def _file(kvs: list[bytes], *, tensors: bytes = b"", n_tensors: int = 0) -> bytes:
    head = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(kvs)) + b"".join(kvs) + tensors
    return head + b"\0" * (-len(head) % 32 + 64)


def _nested_array(depth: int) -> bytes:
    """``depth`` arrays, each holding the next one (the innermost holds one u8)."""
    body = struct.pack("<IQ", 0, 1) + b"\0"
    for _ in range(depth - 1):
        body = struct.pack("<IQ", 9, 1) + body
    return _str("deep") + struct.pack("<I", 9) + body


def _arch(key: str, vtype: int, payload: bytes) -> list[bytes]:
    return [
        _str("general.architecture") + struct.pack("<I", 8) + _str("toy"),
        _str(f"toy.{key}") + struct.pack("<I", vtype) + payload,
    ]


def _align(value: int) -> list[bytes]:
    return [_str("general.alignment") + struct.pack("<II", 4, value)]


CRAFTED = {
    "nested-arrays-5000": _file([_nested_array(5000)]),
    "nested-arrays-9": _file([_nested_array(9)]),
    "alignment-0": _file(_align(0)),
    "alignment-3": _file(_align(3)),
    "alignment-float": _file([_str("general.alignment") + struct.pack("<Id", 12, 32.0)]),
    "alignment-string": _file([_str("general.alignment") + struct.pack("<I", 8) + _str("32")]),
    "block-count-inf": _file(_arch("block_count", 12, struct.pack("<d", float("inf")))),
    "block-count-nan": _file(_arch("block_count", 6, struct.pack("<f", float("nan")))),
    "block-count-fraction": _file(_arch("block_count", 12, struct.pack("<d", 2.5))),
    "block-count-negative": _file(_arch("block_count", 11, struct.pack("<q", -4))),
    "heads-huge-float": _file(_arch("attention.head_count", 12, struct.pack("<d", 1e300))),
    "tensor-2**32-dims": _file(
        [], tensors=_str("w") + struct.pack("<I", 2**32 - 1) + b"\1" * 64, n_tensors=1
    ),
    "unknown-array-type": _file([_str("a") + struct.pack("<IIQ", 9, 99, 1) + b"\0" * 8]),
    "unknown-value-type": _file([_str("a") + struct.pack("<I", 77) + b"\0" * 8]),
    "kv-count-2**64-1": b"GGUF" + struct.pack("<IQQ", 3, 0, 2**64 - 1) + b"\0" * (1 << 20),
    "tensor-count-2**63": b"GGUF" + struct.pack("<IQQ", 3, 2**63, 0) + b"\0" * (1 << 20),
    "string-array-count-huge": _file([_str("t") + struct.pack("<IIQ", 9, 8, 2**40)]),
}


def _read(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.gguf"
        path.write_bytes(data)
        try:
            read_gguf(path)
        except ModelFileError as exc:
            text = str(exc)
            assert "\n" not in text and str(path) in text


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_crafted_header_is_a_one_line_model_file_error(name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.gguf"
        path.write_bytes(CRAFTED[name])
        start = time.monotonic()
        with pytest.raises(ModelFileError) as err:
            read_gguf(path)
    assert "\n" not in str(err.value) and "GGUF header" in str(err.value)
    assert time.monotonic() - start < 2.0  # a crafted count fails at once, not after a loop


def test_shallow_nested_arrays_and_whole_float_sizes_still_read() -> None:
    ok = _file([_nested_array(8), *_arch("block_count", 12, struct.pack("<d", 6.0))])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.gguf"
        path.write_bytes(ok)
        assert read_gguf(path).block_count == 6


VTYPES = st.integers(0, 13)
SCALAR_PAYLOAD = st.binary(min_size=0, max_size=9)


@st.composite
def headers(draw: st.DrawFn) -> bytes:
    """A GGUF header built from random keys, value types and payloads (often malformed)."""
    keys = st.sampled_from(
        ["general.alignment", "general.architecture", "toy.block_count",
         "toy.embedding_length", "toy.attention.head_count", "toy.context_length",
         "tokenizer.ggml.tokens", "x"]
    )  # fmt: skip
    kvs = []
    for _ in range(draw(st.integers(0, 6))):
        kvs.append(_str(draw(keys)) + struct.pack("<I", draw(VTYPES)) + draw(SCALAR_PAYLOAD))
    n_tensors = draw(st.integers(0, 3))
    tensors = draw(st.binary(max_size=64))
    version = draw(st.sampled_from([2, 3, 3, 3, 0, 2**32 - 1]))
    kv_count = draw(st.sampled_from([len(kvs), len(kvs) + 1, 2**64 - 1]))
    head = b"GGUF" + struct.pack("<IQQ", version, n_tensors, kv_count)
    return head + b"".join(kvs) + tensors + draw(st.binary(max_size=64))


@FUZZ
@given(headers())
def test_any_generated_header_reads_or_is_a_model_file_error(data: bytes) -> None:
    _read(data)


@FUZZ
@given(
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), min_size=1, max_size=6),
    st.integers(0, 500),
)
def test_any_mutated_valid_file_reads_or_is_a_model_file_error(
    flips: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(tiny_gguf())
    for pos, byte in flips:
        data[pos % len(data)] = byte
    _read(bytes(data[: len(data) - cut % len(data)]))


@FUZZ
@given(st.binary(max_size=300))
def test_any_bytes_after_the_magic_read_or_are_a_model_file_error(tail: bytes) -> None:
    _read(b"GGUF" + tail)
