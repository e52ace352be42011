"""The GGUF header reader and the footprint estimate (calibrated against measured RSS)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from swapos.backends.llama import LlamaBackend
from swapos.errors import ModelFileError
from swapos.models.bundled import BUNDLED_NAMES, bundled_model_path
from swapos.models.gguf import read_gguf
from swapos.models.spec import ModelSpec
from swapos.policies.memory import TOLERANCE, estimate_footprint, kv_cache_bytes


def _str(s: str) -> bytes:
    return struct.pack("<Q", len(s)) + s.encode()


def tiny_gguf(*, tensor_bytes: int = 64, data_bytes: int = 64) -> bytes:
    """A valid GGUF v3 file with a few metadata keys and one f32 tensor of 16 elements."""
    kvs = [
        _str("general.architecture") + struct.pack("<I", 8) + _str("toy"),
        _str("toy.block_count") + struct.pack("<II", 4, 2),
        _str("toy.embedding_length") + struct.pack("<II", 4, 8),
        _str("toy.attention.head_count") + struct.pack("<II", 4, 2),
        _str("tokenizer.ggml.tokens")
        + struct.pack("<IIQ", 9, 8, 3)
        + b"".join(_str(t) for t in ("a", "bb", "ccc")),
        _str("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 3) + b"\0" * 12,
    ]
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, len(kvs)) + b"".join(kvs)
    head += _str("w") + struct.pack("<IQ", 1, tensor_bytes // 4) + struct.pack("<IQ", 0, 0)
    head += b"\0" * (-len(head) % 32)
    return head + b"\1" * data_bytes


def test_reads_the_metadata_of_a_small_file(tmp_path: Path) -> None:
    path = tmp_path / "toy.gguf"
    path.write_bytes(tiny_gguf())
    info = read_gguf(path)
    assert (info.architecture, info.block_count, info.embedding_length) == ("toy", 2, 8)
    assert (info.head_count, info.head_count_kv, info.key_length) == (2, 2, 4)
    assert info.vocab_size == 3 and info.tensor_count == 1
    assert info.data_offset + info.data_size == info.file_size


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"NOPE" + b"\0" * 64, "not a GGUF file"),
        (tiny_gguf()[:40], "truncated or corrupt GGUF header"),
        (tiny_gguf(data_bytes=32), "is truncated: its tensors need"),
        (b"GG", "too small"),
    ],
)
def test_bad_files_are_model_file_errors_naming_the_file(
    tmp_path: Path, content: bytes, match: str
) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelFileError, match=match) as err:
        read_gguf(path)
    assert str(path) in str(err.value)


def test_a_missing_file_is_a_model_file_error(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="does not exist"):
        read_gguf(tmp_path / "absent.gguf")


@pytest.mark.real_model
def test_metadata_of_the_bundled_model() -> None:
    info = read_gguf(bundled_model_path("gemma3-270m-q4_k_m"))
    assert info.architecture == "gemma3" and info.version == 3
    assert (info.block_count, info.embedding_length, info.head_count) == (18, 640, 4)
    assert (info.head_count_kv, info.key_length, info.value_length) == (1, 256, 256)
    assert info.context_length == 32768 and info.vocab_size == 262144
    assert info.data_offset + info.data_size == info.file_size == 253113024


@pytest.mark.real_model
def test_kv_cache_size_follows_the_metadata() -> None:
    info = read_gguf(bundled_model_path("gemma3-270m-q8_0"))
    # 18 layers x 1 KV head x (256 + 256) x 2 bytes = 18 KiB per token.
    assert kv_cache_bytes(info, n_ctx=2048, type_k="f16", type_v="f16") == 2048 * 18 * 1024
    q8 = kv_cache_bytes(info, n_ctx=2048, type_k="q8_0", type_v="q8_0")
    assert q8 == 2048 * 18 * 512 * 34 // 32


_MEASURE_RSS = """
import json, sys, threading
import anyio
from swapos.backends.llama import load_model
from swapos.data.sampling import SamplingParams
from swapos.models.spec import ModelSpec
from swapos.sysinfo import rss_bytes

spec = ModelSpec(name=sys.argv[1], path=sys.argv[2])
start = rss_bytes()
model = load_model(spec, threading.Event())

async def generate() -> None:
    prompt = await model.tokenize("def add(a, b):\\n    return a + b\\n" * 8)
    await model.generate(prompt, SamplingParams(max_tokens=4))

anyio.run(generate)
print("RSS", json.dumps({"measured": rss_bytes() - start, "footprint": model.footprint_bytes}))
model.close_sync()
"""


def _measured_in_a_fresh_process(spec: ModelSpec) -> tuple[int, int]:
    """The RSS growth of loading ``spec`` and generating a few tokens, and the loaded model's
    footprint, measured in a new interpreter: in the test process, memory that earlier tests
    freed can be reused by the model's buffers, and the growth depends on the test order (the
    270M's read 331 MB once in a full run, 344 MB alone)."""
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE_RSS, spec.name, spec.path],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    line = next(line for line in out.stdout.splitlines() if line.startswith("RSS "))
    result = json.loads(line.removeprefix("RSS "))
    return int(result["measured"]), int(result["footprint"])


@pytest.mark.real_model
@pytest.mark.parametrize("name", BUNDLED_NAMES)
def test_estimate_is_within_tolerance_of_measured_rss(name: str) -> None:
    spec = ModelSpec(name=name, path=str(bundled_model_path(name)))
    estimate = LlamaBackend().estimate_footprint(spec)
    info = read_gguf(spec.path)
    assert estimate == estimate_footprint(
        info.file_size, info, n_ctx=spec.n_ctx, n_batch=spec.n_batch
    )
    measured, footprint = _measured_in_a_fresh_process(spec)
    assert abs(estimate - measured) <= TOLERANCE * measured, (estimate, measured)
    assert footprint >= estimate


def test_the_token_table_digest_tells_one_vocabulary_from_another() -> None:
    small = read_gguf(bundled_model_path("qwen2.5-coder-0.5b-instruct-q4_k_m"))
    large = read_gguf(bundled_model_path("qwen2.5-coder-1.5b-instruct-q4_k_m"))
    gemma = read_gguf(bundled_model_path("gemma3-270m-q4_k_m"))
    assert len(small.token_table_digest) == 64
    assert small.token_table_digest == large.token_table_digest
    assert gemma.token_table_digest not in ("", small.token_table_digest)


def test_the_footprint_counts_every_slots_kv_cells() -> None:
    backend = LlamaBackend()
    path = str(bundled_model_path("gemma3-270m-q4_k_m"))
    one, three = (ModelSpec(name="g", path=path, n_ctx=1024, slots=n) for n in (1, 3))
    per_slot = kv_cache_bytes(read_gguf(path), n_ctx=1024, type_k="f16", type_v="f16")
    assert backend.estimate_footprint(three) - backend.estimate_footprint(one) == 2 * per_slot
    assert backend.estimate_state_bytes(three) == backend.estimate_state_bytes(one) == per_slot
