"""Synthetic GGUF models of a chosen size: random weights, a real architecture llama.cpp loads.

``bench swap --sizes`` measures how loading and the first token scale with the file's size,
on files made here rather than downloaded. Each file is a ``llama``-architecture model:

- **Tensors**: F16 weights (``general.file_type`` = MOSTLY_F16), F32 norms. F16 keeps the
  compute per byte low (2 bytes per weight, against ~1.06 for Q8_0), so a 4 GiB model still
  prefills a short prompt in seconds on two cores; the load cost depends on bytes, not on
  the tensor type.
- **Shapes**: hidden size 2048 (32 heads of 64, 4 KV heads: TinyLlama's attention) from
  256 MiB up, 1024 below 256 MiB and 256 below 32 MiB; the layer count and the FFN width
  are solved so the file lands within a few KiB per layer of the target.
- **Vocabulary**: a real SentencePiece-style (``llama``) tokenizer with byte fallback:
  ``<unk> <s> </s>`` and the 256 byte tokens ``<0x00>..<0xFF>``, so any text tokenizes (one
  token per UTF-8 byte). The bundled models' vocabularies (151,936 Qwen, 262,144 Gemma
  entries) would put 0.3-1 GB into the embedding alone and rule out small files.
- **Weights**: random F16 values of magnitude 2^-7..2^-6 with a random sign (random
  mantissa bits under a fixed exponent: finite, cheap to make), from a seeded PCG64 stream,
  so the same parameters always give the same bytes. The output is garbage; the bytes, the
  shapes and the work per token are those of a real model.

Files live in ``<user cache>/swapos/synthetic/``, named by their parameters, beside a JSON
sidecar with their size, mtime and sha256 (recorded so a load never re-hashes them). They are
written to a temporary file and renamed into place under a file lock, streaming the weights in
16 MiB chunks (generating 4 GiB never holds more than a chunk), and reused while the file
matches its sidecar. Needs the ``gguf`` package (``pip install 'swapos[sizes]'``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import msgspec
import structlog

from swapos.errors import ModelFileError
from swapos.models.atomic import temp_path
from swapos.models.bundled import cache_dir
from swapos.models.digests import remember_digest

log = structlog.get_logger(__name__)

GENERATOR_VERSION = 1
"""Part of every file name: bump it when the bytes a plan produces change."""
CHUNK = 16 << 20
"""Bytes of weights generated and written at a time."""
ALIGNMENT = 32
"""GGUF's default tensor data alignment."""
F16_MASK, F16_EXPONENT = 0x83FF, 0x2000
"""Keep sign and mantissa bits, force the exponent to 2^-7: finite values of 2^-7..2^-6."""
HEAD_DIM = 64
VOCAB = ("<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)))
"""The byte-fallback vocabulary: unknown, BOS, EOS, then one token per byte value."""
_TOKEN_TYPES = (2, 3, 3, *([6] * 256))
"""llama.cpp token types: UNKNOWN, CONTROL, CONTROL, then BYTE."""
_thread_lock = threading.Lock()


class SyntheticPlan(msgspec.Struct, frozen=True, kw_only=True):
    """The parameters of one synthetic model; the file's bytes follow from them alone.

    Attributes:
        n_embd: hidden size.
        n_layer: transformer blocks.
        n_ff: FFN width.
        n_head, n_head_kv: attention and KV heads (head size :data:`HEAD_DIM`).
        n_ctx_train: the context length the metadata declares.
        seed: the random stream's seed.
    """

    n_embd: int
    n_layer: int
    n_ff: int
    n_head: int
    n_head_kv: int
    n_ctx_train: int = 2048
    seed: int = 0

    @property
    def name(self) -> str:
        """The file's stem: every parameter that changes its bytes."""
        return (
            f"synthetic-v{GENERATOR_VERSION}-llama-f16-e{self.n_embd}-l{self.n_layer}"
            f"-f{self.n_ff}-h{self.n_head}x{self.n_head_kv}-c{self.n_ctx_train}-s{self.seed}"
        )

    def tensors(self) -> list[tuple[str, tuple[int, ...], bool]]:
        """``(name, numpy shape, is_f16)`` of every tensor, in file order (F32 otherwise)."""
        d, kv = self.n_embd, self.n_head_kv * HEAD_DIM
        out: list[tuple[str, tuple[int, ...], bool]] = [
            ("token_embd.weight", (len(VOCAB), d), True)
        ]
        for i in range(self.n_layer):
            b = f"blk.{i}."
            out += [
                (b + "attn_norm.weight", (d,), False),
                (b + "attn_q.weight", (d, d), True),
                (b + "attn_k.weight", (kv, d), True),
                (b + "attn_v.weight", (kv, d), True),
                (b + "attn_output.weight", (d, d), True),
                (b + "ffn_norm.weight", (d,), False),
                (b + "ffn_gate.weight", (self.n_ff, d), True),
                (b + "ffn_up.weight", (self.n_ff, d), True),
                (b + "ffn_down.weight", (d, self.n_ff), True),
            ]
        out += [("output_norm.weight", (d,), False), ("output.weight", (len(VOCAB), d), True)]
        return out

    def data_bytes(self) -> int:
        """Bytes of tensor data, alignment padding included."""
        return sum(_padded(_nbytes(shape, f16)) for _, shape, f16 in self.tensors())


def _nbytes(shape: tuple[int, ...], f16: bool) -> int:
    n = 1
    for dim in shape:
        n *= dim
    return n * (2 if f16 else 4)


def _padded(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def plan_for_size(target_bytes: int, *, seed: int = 0) -> SyntheticPlan:
    """The plan whose file is closest to ``target_bytes`` (within a few KiB per layer, and
    never under by more than one FFN column per layer; at least 2 layers).

    Raises:
        ValueError: ``target_bytes`` is below 4 MiB (too small for two layers).
    """
    if target_bytes < 4 << 20:
        raise ValueError(f"a synthetic model needs at least 4 MiB, not {target_bytes} bytes")
    d = 256 if target_bytes < 32 << 20 else 1024 if target_bytes < 256 << 20 else 2048
    n_head = d // HEAD_DIM
    n_head_kv = min(4, n_head)
    n_ff_nominal = d * 11 // 4  # TinyLlama's 5632 at 2048
    fixed = SyntheticPlan(n_embd=d, n_layer=0, n_ff=0, n_head=n_head, n_head_kv=n_head_kv)
    attn = 2 * (2 * d * d + 2 * d * n_head_kv * HEAD_DIM) + 2 * 4 * d
    room = target_bytes - fixed.data_bytes() - 64 * 1024  # header and vocabulary
    n_layer = max(2, round(room / (attn + 3 * 2 * d * n_ff_nominal)))
    n_ff = max(64, (room // n_layer - attn) // (3 * 2 * d) // 64 * 64)
    return SyntheticPlan(
        n_embd=d, n_layer=n_layer, n_ff=n_ff, n_head=n_head, n_head_kv=n_head_kv, seed=seed
    )


def synthetic_dir() -> Path:
    """Where synthetic models are kept: ``<user cache>/swapos/synthetic``."""
    return cache_dir().parent / "synthetic"


def synthetic_model(target_bytes: int, *, seed: int = 0, directory: Path | None = None) -> Path:
    """The path of the synthetic model closest to ``target_bytes``, written on first use.

    Blocking (writing 4 GiB takes tens of seconds): call it from a worker thread. The
    file's sha256 is recorded (:func:`~swapos.models.digests.remember_digest`), so loading
    it does not hash it again.

    Raises:
        ModelFileError: the ``gguf`` package is missing or the file cannot be written.
        ValueError: ``target_bytes`` is too small (see :func:`plan_for_size`).
    """
    plan = plan_for_size(target_bytes, seed=seed)
    directory = directory or synthetic_dir()
    path = directory / f"{plan.name}.gguf"
    sidecar = directory / f"{plan.name}.json"
    with _locked(directory):
        entry = _read_json(sidecar)
        if not _matches(path, entry):
            for stale in directory.glob(f".{path.name}.*.tmp"):
                stale.unlink(missing_ok=True)
            entry = _build(plan, path)
            with temp_path(sidecar) as tmp:
                tmp.write_text(json.dumps(entry, indent=2, sort_keys=True))
                os.replace(tmp, sidecar)
    remember_digest(str(path), entry["size"], entry["mtime_ns"], entry["sha256"])
    return path


def _matches(path: Path, entry: dict[str, Any]) -> bool:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return False
    return (
        "sha256" in entry
        and entry.get("size") == stat.st_size
        and entry.get("mtime_ns") == stat.st_mtime_ns
    )


def _build(plan: SyntheticPlan, path: Path) -> dict[str, Any]:
    """Write ``plan`` to ``path`` atomically; its sidecar entry."""
    with temp_path(path) as tmp:
        try:
            digest = write_synthetic(plan, tmp)
        except OSError as exc:
            raise ModelFileError(
                f"cannot write synthetic model {path} ({exc.strerror}); check the free space "
                f"in {path.parent}"
            ) from exc
        os.replace(tmp, path)
    stat = path.stat()
    log.info("synthetic_model.built", path=str(path), size=stat.st_size)
    return {
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "sha256": digest,
        "plan": msgspec.to_builtins(plan),
    }


def write_synthetic(plan: SyntheticPlan, path: Path) -> str:
    """Write the GGUF file of ``plan`` at ``path`` (overwriting it), streaming the weights;
    its sha256.

    Raises:
        ModelFileError: the ``gguf`` package is not installed.
    """
    try:
        import gguf
        import numpy as np
    except ImportError as exc:
        raise ModelFileError(
            "synthetic models need the gguf package: pip install 'swapos[sizes]'"
        ) from exc
    writer = gguf.GGUFWriter(None, "llama")
    _add_metadata(writer, plan)
    for name, shape, f16 in plan.tensors():
        dtype = np.dtype(np.float16 if f16 else np.float32)
        writer.add_tensor_info(name, shape, dtype, _nbytes(shape, f16))
    writer.write_header_to_file(path)
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    assert writer.fout is not None
    out = writer.fout[0]
    out.flush()
    sha = hashlib.sha256(path.read_bytes()[: out.tell()])
    rng = np.random.Generator(np.random.PCG64(plan.seed))
    try:
        for _, shape, f16 in plan.tensors():
            _pad(out, sha)
            n = _nbytes(shape, f16)
            if not f16:  # norm weights: ones
                _write(out, sha, np.ones(n // 4, dtype=np.float32).tobytes())
                continue
            while n > 0:
                k = min(n, CHUNK)
                bits = np.frombuffer(rng.bytes(k), dtype=np.uint16)
                _write(out, sha, ((bits & F16_MASK) | F16_EXPONENT).tobytes())
                n -= k
        _pad(out, sha)
        out.flush()
        os.fsync(out.fileno())
    finally:
        writer.close()
    return sha.hexdigest()


def _add_metadata(writer: Any, plan: SyntheticPlan) -> None:
    import gguf

    a = "llama"
    writer.add_name(plan.name)
    writer.add_uint32(f"{a}.context_length", plan.n_ctx_train)
    writer.add_uint32(f"{a}.embedding_length", plan.n_embd)
    writer.add_uint32(f"{a}.block_count", plan.n_layer)
    writer.add_uint32(f"{a}.feed_forward_length", plan.n_ff)
    writer.add_uint32(f"{a}.rope.dimension_count", HEAD_DIM)
    writer.add_uint32(f"{a}.attention.head_count", plan.n_head)
    writer.add_uint32(f"{a}.attention.head_count_kv", plan.n_head_kv)
    writer.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-5)
    writer.add_uint32(f"{a}.vocab_size", len(VOCAB))
    writer.add_uint32("general.file_type", int(gguf.LlamaFileType.MOSTLY_F16))
    writer.add_string("tokenizer.ggml.model", "llama")
    writer.add_array("tokenizer.ggml.tokens", list(VOCAB))
    writer.add_array("tokenizer.ggml.scores", [0.0] * len(VOCAB))
    writer.add_array("tokenizer.ggml.token_type", list(_TOKEN_TYPES))
    writer.add_uint32("tokenizer.ggml.unknown_token_id", 0)
    writer.add_uint32("tokenizer.ggml.bos_token_id", 1)
    writer.add_uint32("tokenizer.ggml.eos_token_id", 2)
    writer.add_bool("tokenizer.ggml.add_bos_token", True)


def _write(out: IO[bytes], sha: Any, data: bytes) -> None:
    sha.update(data)
    out.write(data)


def _pad(out: IO[bytes], sha: Any) -> None:
    pad = _padded(out.tell()) - out.tell()
    if pad:
        _write(out, sha, bytes(pad))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with _thread_lock, (directory / ".lock").open("a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
