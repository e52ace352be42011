"""What Ollama's clients are told about the profile's models' files: size, digest, details.

A model's size, digest and details come from its GGUF file (read in a worker thread, once
per file version); a model without a readable file (a remote model, a fake one in tests) is
listed with size 0 and no digest. Its names: :mod:`swapos.serve.names`.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass

import anyio.to_thread

from swapos.errors import ModelFileError
from swapos.models.digests import file_digest
from swapos.models.gguf import read_gguf
from swapos.models.spec import ModelSpec
from swapos.serve.ollama_schemas import Details

FILE_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    30: "IQ4_XS",
    32: "BF16",
}
"""llama.cpp's ``general.file_type`` values, as Ollama's ``quantization_level`` names them."""


@dataclass(frozen=True)
class FileFacts:
    """What a model's file says about it."""

    size: int
    digest: str
    modified_at: str
    details: Details
    model_info: dict[str, object]
    chat_template: str


_facts: dict[tuple[str, int, int], FileFacts] = {}


def rfc3339(when: dt.datetime) -> str:
    """``when`` as Ollama writes times: RFC 3339 in UTC with a ``Z``."""
    return when.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def now_rfc3339() -> str:
    return rfc3339(dt.datetime.now(dt.UTC))


async def file_facts(spec: ModelSpec) -> FileFacts:
    """Size, digest, details and metadata of ``spec``'s file (computed in a worker thread
    the first time for each version of the file; the digest of a bundled model is the one
    its manifest recorded)."""
    if spec.remote:
        return _no_file(spec, fmt="remote")
    try:
        stat = os.stat(spec.path)
    except OSError:
        return _no_file(spec)
    key = (spec.path, stat.st_size, stat.st_mtime_ns)
    known = _facts.get(key)
    if known is None:
        known = await anyio.to_thread.run_sync(_read_facts, spec, stat)
        _facts[key] = known
    return known


def _no_file(spec: ModelSpec, fmt: str = "gguf") -> FileFacts:
    return FileFacts(
        size=0,
        digest="",
        modified_at=now_rfc3339(),
        details=Details(format=fmt),
        model_info={"general.context_length": spec.ctx_cap},
        chat_template="",
    )


def _read_facts(spec: ModelSpec, stat: os.stat_result) -> FileFacts:
    modified = rfc3339(dt.datetime.fromtimestamp(stat.st_mtime, dt.UTC))
    try:
        info = read_gguf(spec.path)
    except ModelFileError:
        return FileFacts(
            size=stat.st_size,
            digest="",
            modified_at=modified,
            details=Details(),
            model_info={},
            chat_template="",
        )
    meta = info.metadata
    file_type = meta.get("general.file_type")
    quant = FILE_TYPES.get(file_type, str(file_type)) if isinstance(file_type, int) else ""
    size_label = meta.get("general.size_label")
    details = Details(
        family=info.architecture,
        families=[info.architecture],
        parameter_size=size_label if isinstance(size_label, str) else "",
        quantization_level=quant,
    )
    template = meta.get("tokenizer.chat_template")
    return FileFacts(
        size=stat.st_size,
        digest=file_digest(spec.path),
        modified_at=modified,
        details=details,
        model_info={k: v for k, v in meta.items() if k != "tokenizer.chat_template"},
        chat_template=template if isinstance(template, str) else "",
    )
