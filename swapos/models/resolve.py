"""Resolving a profile's models to files: bundled names assembled, every header checked.

Apart from :mod:`swapos.models.profile` (which only parses and validates) so that profiles and
the bundled-model table do not import each other.
"""

from __future__ import annotations

from collections.abc import Sequence

from swapos.errors import ModelFileError, ProfileError
from swapos.models.bundled import bundled_model_path
from swapos.models.gguf import read_gguf
from swapos.models.model_config import start_ctx
from swapos.models.profile import ModelConfig, Profile, gpu_layer_count
from swapos.models.spec import ModelSpec, RemoteEndpoint
from swapos.sysinfo import GPU_INSTALL_HINT, gpu_offload_supported


def model_specs(profile: Profile) -> dict[str, ModelSpec]:
    """Resolve every model of ``profile`` to a :class:`ModelSpec` with a real file path.

    Bundled models are assembled (and derived variants quantized) on first use. A remote
    model (``api_base``) gets a spec with its endpoint and its URL as the path.

    A model file's spec is loaded with its start context (:func:`start_ctx`) and may grow to
    its cap: the profile's ``n_ctx``, bounded by the context length its GGUF header says it
    was trained for (:func:`context_cap`).

    Raises:
        ProfileError: a bundled name that does not exist.
        ModelFileError: a bundled model that cannot be assembled.
    """
    specs: dict[str, ModelSpec] = {}
    for name, cfg in profile.models.items():
        if cfg.api_base is not None:
            specs[name] = remote_spec(name, cfg)
            continue
        path = cfg.path if cfg.path is not None else str(bundled_model_path(cfg.bundled or ""))
        trained = trained_context(path)
        specs[name] = ModelSpec(
            name=name,
            path=path,
            n_ctx=start_ctx(cfg),
            max_ctx=context_cap(cfg, trained),
            trained_ctx=trained,
            n_batch=cfg.n_batch,
            n_threads=cfg.threads,
            use_mmap=cfg.use_mmap,
            type_k=cfg.type_k,
            type_v=cfg.type_v,
            repack=cfg.repack,
            gpu_layers=gpu_layer_count(cfg),
            main_gpu=cfg.main_gpu,
            draft=cfg.draft,
        )
    return specs


def trained_context(path: str) -> int:
    """The context length ``path``'s GGUF header says the model was trained for
    (``<arch>.context_length``), read without loading the model; 0 when the file cannot be
    read (:func:`checked_model_specs` then names what is wrong with it)."""
    try:
        return max(read_gguf(path).context_length, 0)
    except ModelFileError:
        return 0


def context_cap(cfg: ModelConfig, trained: int) -> int:
    """The most context ``cfg``'s model is loaded with: its ``n_ctx``, at most ``trained``
    (when known), never less than its start (a profile's own start is kept as it is)."""
    cap = min(cfg.n_ctx, trained) if trained > 0 else cfg.n_ctx
    return max(cap, start_ctx(cfg))


def checked_model_specs(profile: Profile) -> dict[str, ModelSpec]:
    """:func:`model_specs`, then every file opened and its GGUF header checked, so a bad
    model file is refused before any phase runs; so is a model asking for GPU layers when
    the installed llama-cpp-python is a CPU-only build.

    Raises:
        ProfileError: a bundled name that does not exist; ``gpu_layers`` on a CPU-only
            build (one line saying how to install a GPU build).
        ModelFileError: a file that is missing, truncated or not a GGUF model (named).
    """
    specs = model_specs(profile)
    local = [s for s in specs.values() if not s.remote]
    if any(s.offloaded for s in local) and not gpu_offload_supported():
        refuse_offload(local, build="this llama-cpp-python is a CPU-only build")
    for spec in specs.values():
        if not spec.remote:  # a remote model is checked when it is "loaded" (GET /models)
            read_gguf(spec.path)
    return specs


def remote_spec(name: str, cfg: ModelConfig) -> ModelSpec:
    """The spec of a remote model (``cfg.api_base`` set, as :func:`check_profile` checked)."""
    assert cfg.api_base is not None and cfg.api_model is not None
    base = cfg.api_base.rstrip("/")
    return ModelSpec(
        name=name,
        path=base,
        n_ctx=cfg.n_ctx,
        footprint_bytes=0,
        api=RemoteEndpoint(
            base=base,
            model=cfg.api_model,
            key_env=cfg.api_key_env,
            timeout_s=cfg.api_timeout_s,
            continues=cfg.api_continue,
        ),
    )


def refuse_offload(specs: Sequence[ModelSpec], *, build: str) -> None:
    """Raise for the first spec that asks for layers on a GPU: this ``build`` has none.

    Raises:
        ProfileError: one line, naming ``models.NAME.gpu_layers`` and how to install a GPU
            build (:data:`~swapos.sysinfo.GPU_INSTALL_HINT`).
    """
    for spec in specs:
        if spec.offloaded:
            layers = '"all"' if spec.gpu_layers < 0 else str(spec.gpu_layers)
            raise ProfileError(
                f"`models.{spec.name}.gpu_layers` = {layers}, but {build}: {GPU_INSTALL_HINT}"
            )
