"""Resolving a profile's models to files: bundled names assembled, every header checked.

Apart from :mod:`swapos.models.profile` (which only parses and validates) so that profiles and
the bundled-model table do not import each other.
"""

from __future__ import annotations

from swapos.models.bundled import bundled_model_path
from swapos.models.gguf import read_gguf
from swapos.models.profile import Profile
from swapos.models.spec import ModelSpec


def model_specs(profile: Profile) -> dict[str, ModelSpec]:
    """Resolve every model of ``profile`` to a :class:`ModelSpec` with a real file path.

    Bundled models are assembled (and derived variants quantized) on first use.

    Raises:
        ProfileError: a bundled name that does not exist.
        ModelFileError: a bundled model that cannot be assembled.
    """
    specs: dict[str, ModelSpec] = {}
    for name, cfg in profile.models.items():
        path = cfg.path if cfg.path is not None else str(bundled_model_path(cfg.bundled or ""))
        specs[name] = ModelSpec(
            name=name,
            path=path,
            n_ctx=cfg.n_ctx,
            n_batch=cfg.n_batch,
            n_threads=cfg.threads,
            use_mmap=cfg.use_mmap,
            type_k=cfg.type_k,
            type_v=cfg.type_v,
            repack=cfg.repack,
        )
    return specs


def checked_model_specs(profile: Profile) -> dict[str, ModelSpec]:
    """:func:`model_specs`, then every file opened and its GGUF header checked, so a bad
    model file is refused before any phase runs.

    Raises:
        ProfileError: a bundled name that does not exist.
        ModelFileError: a file that is missing, truncated or not a GGUF model (named).
    """
    specs = model_specs(profile)
    for spec in specs.values():
        read_gguf(spec.path)
    return specs
