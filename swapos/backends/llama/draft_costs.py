"""Where a model's measured drafting costs come from: a profile's pin, or ``bench decode``'s
cache for this model file and thread count.

``python -m swapos.bench decode`` measures, per model, what a verification batch costs and
how often drafts are accepted, and saves it as a :class:`~swapos.data.generation.DraftCosts`
under ``$XDG_CACHE_HOME/swapos/decode/`` (keyed by the file's sha256 and the threads), so
every later run on this machine reads it at load. A profile pins a file instead with
``draft = "path.json"`` (a saved costs file or a ``bench decode --out`` report), or turns
drafting off with ``draft = "off"``. With neither, the model never drafts: what pays is
measured per model and machine, never assumed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
import platformdirs
import structlog

from swapos.data.generation import DraftCosts
from swapos.models.digests import file_digest
from swapos.models.spec import ModelSpec

log = structlog.get_logger(__name__)


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/swapos/decode`` or the platform's user cache."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) / "swapos" if xdg else Path(platformdirs.user_cache_dir("swapos"))
    return base / "decode"


def cache_path(digest: str, threads: int) -> Path:
    """Where the costs of the model file with sha256 ``digest`` at ``threads`` are kept."""
    return cache_root() / f"{digest[:16]}-t{threads}.json"


def save_cached(spec: ModelSpec, costs: DraftCosts) -> Path:
    """Keep ``costs`` as the measured costs of ``spec`` on this machine (atomically)."""
    path = cache_path(file_digest(spec.path), spec.threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.encode(costs))
    os.replace(tmp, path)
    return path


def costs_for(spec: ModelSpec) -> DraftCosts | None:
    """The drafting costs of ``spec``: pinned, cached, or None (never draft).

    A file that cannot be read is logged and treated as absent: drafting is an
    optimisation, and a stale or broken cache must never stop a load.
    """
    pin = spec.draft
    if pin == "off":
        return None
    if pin:
        return _read(Path(pin), spec, source=f"pinned {pin}")
    try:
        path = cache_path(file_digest(spec.path), spec.threads)
    except OSError:
        return None
    return _read(path, spec, source=str(path)) if path.exists() else None


def unmeasured(specs: Iterable[ModelSpec]) -> list[str]:
    """The local models of ``specs`` with no drafting costs (none pinned or cached) and
    drafting not turned off: on this machine they decode plain and draw in turn."""
    return [s.name for s in specs if not s.remote and s.draft != "off" and costs_for(s) is None]


def _read(path: Path, spec: ModelSpec, *, source: str) -> DraftCosts | None:
    try:
        raw: Any = msgspec.json.decode(path.read_bytes())
        if isinstance(raw, dict) and "models" in raw:  # a bench decode --out report
            raw = raw["models"][spec.name]["costs"]
        costs = msgspec.convert(raw, DraftCosts)
    except (OSError, KeyError, TypeError, msgspec.MsgspecError) as exc:
        log.warning("draft_costs.unreadable", model=spec.name, path=str(path), error=str(exc))
        return None
    if not costs.verify_ratio or costs.verify_ratio[0] <= 0:
        log.warning("draft_costs.invalid", model=spec.name, path=str(path))
        return None
    return msgspec.structs.replace(costs, source=source)
