"""One model as a profile declares it (``[models.NAME]``), and the checks of its fields.

Apart from :mod:`swapos.models.profile`, which re-exports :class:`ModelConfig` and runs these
checks for each of a profile's models (:func:`check_model`, :func:`check_aliases`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

import msgspec

from swapos.data.durations import FOREVER, DurationError, parse_duration
from swapos.errors import ProfileError

PromptStyle = Literal["auto", "chat", "completion"]
DEFAULT_START_CTX = 4096
"""The context a model is first loaded with when its profile names no ``n_ctx_start``."""


class ModelConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One model as a profile declares it: a file (``path``), a bundled name, or a remote
    model on an OpenAI-compatible endpoint (``api_base`` + ``api_model``, the bearer key read
    from the environment variable ``api_key_env``; ``api_timeout_s`` bounds each wait for the
    server; ``api_continue`` says the endpoint continues a final assistant message, as
    ``swapos serve`` does). A remote model's ``n_ctx`` is what prompts are budgeted to; its
    load settings (``n_batch``, ``threads``...) do not apply.

    ``n_ctx`` is the *cap* of a model file's context: the most it is ever loaded with (and
    never more than the length it was trained for, read from its GGUF header). It is first
    loaded with ``n_ctx_start`` (default: the smaller of ``n_ctx`` and
    :data:`DEFAULT_START_CTX`); ``swapos serve`` reloads it with a larger context, up to the
    cap, when a request needs more (``policies/contexts.py``, ``docs/serve.md``). The
    pipeline's phases use the start.

    ``prompt`` chooses how phases talk to it: ``"chat"`` (its chat template; ChatML when the
    file has none), ``"completion"`` (a markdown document the model continues: base models),
    or ``"auto"``: chat when the GGUF carries ``tokenizer.chat_template``. ``repack`` lets
    llama.cpp copy weights into its CPU-optimised layouts (more memory and slower loads; see
    :class:`~swapos.models.spec.ModelSpec`).

    ``gpu_layers`` offloads that many of its layers to a GPU (``"all"``: every layer; 0, the
    default: none), ``main_gpu`` says on which of llama.cpp's devices (its index among the
    GPUs; see ``docs/gpu.md``). ``draft`` pins the drafting costs the decode
    loop reads (a ``bench decode`` file) or turns drafting off (``"off"``); unset, the costs
    ``bench decode`` cached for this file on this machine are used (see
    ``docs/timings.md``).

    For serving (``docs/serve.md``): ``aliases`` are more names the model answers to;
    ``ttl`` unloads it once it has been idle that long (seconds or a duration such as
    ``"5m"``); ``pin`` keeps it from ever being evicted to make room for another model.
    """

    path: str | None = None
    bundled: str | None = None
    n_ctx: int = 2048
    n_ctx_start: int | None = None
    n_batch: int = 128
    threads: int | None = None
    use_mmap: bool = True
    type_k: str = "f16"
    type_v: str = "f16"
    prompt: PromptStyle = "auto"
    repack: bool = False
    draft: str | None = None
    api_base: str | None = None
    api_model: str | None = None
    api_key_env: str | None = None
    api_timeout_s: float = 600.0
    api_continue: bool = False
    gpu_layers: int | str = 0
    main_gpu: int = 0
    aliases: list[str] = msgspec.field(default_factory=list)
    ttl: float | str | None = None
    pin: bool = False


def gpu_layer_count(cfg: ModelConfig) -> int:
    """``cfg.gpu_layers`` as llama.cpp's ``n_gpu_layers``: ``"all"`` is -1 (every layer
    and the output head), a number is that many layers. Call after :func:`check_profile`."""
    return -1 if cfg.gpu_layers == "all" else int(cfg.gpu_layers)


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_remote(name: str, cfg: ModelConfig, source: str) -> None:
    """The ``api_*`` fields of ``models.NAME``: all or nothing, a URL, a variable's name."""
    where = f"{source}: `models.{name}`"
    if cfg.api_base is None:
        if cfg.api_model is not None or cfg.api_key_env is not None or cfg.api_continue:
            raise ProfileError(
                f"{where}: `api_model`, `api_key_env` and `api_continue` need `api_base`"
            )
        return
    if not re.match(r"^https?://[^/\s]+", cfg.api_base):
        raise ProfileError(
            f"{where}.api_base` = {cfg.api_base!r} is not an http(s) URL; write e.g. "
            f'"http://127.0.0.1:8080/v1"'
        )
    if not cfg.api_model:
        raise ProfileError(
            f"{where}: a remote model needs `api_model`, the name its endpoint serves it under"
        )
    if cfg.api_key_env is not None and not _ENV_NAME.match(cfg.api_key_env):
        raise ProfileError(
            f"{where}.api_key_env` = {cfg.api_key_env!r} is not an environment variable's "
            "name; write the variable's name (e.g. OPENAI_API_KEY), never the key itself"
        )
    if cfg.api_timeout_s <= 0:
        raise ProfileError(f"{where}.api_timeout_s` must be > 0")


def _check_gpu(name: str, cfg: ModelConfig, source: str) -> None:
    """``gpu_layers`` and ``main_gpu`` of ``models.NAME``: a count or "all", on a device."""
    where = f"{source}: `models.{name}"
    layers = cfg.gpu_layers
    if isinstance(layers, str) and layers != "all":
        raise ProfileError(
            f'{where}.gpu_layers` = {layers!r}: write a number of layers (0: none) or "all"'
        )
    if isinstance(layers, int) and layers < 0:
        raise ProfileError(
            f'{where}.gpu_layers` = {layers} must be >= 0; write "all" to offload every layer'
        )
    if cfg.main_gpu < 0:
        raise ProfileError(f"{where}.main_gpu` = {cfg.main_gpu} must be >= 0 (a GPU's index)")
    offloads = layers == "all" or (isinstance(layers, int) and layers > 0)
    if cfg.main_gpu and not offloads:
        raise ProfileError(
            f"{where}.main_gpu` = {cfg.main_gpu} but `gpu_layers` is 0: set `gpu_layers` "
            "to put layers on that GPU, or drop `main_gpu`"
        )
    if offloads and cfg.api_base is not None:
        raise ProfileError(
            f"{where}.gpu_layers` applies to model files; a remote model (`api_base`) runs "
            "where its server puts it: drop `gpu_layers`"
        )


def start_ctx(cfg: ModelConfig) -> int:
    """The context ``cfg``'s model is first loaded with (a remote model's: its ``n_ctx``)."""
    if cfg.api_base is not None:
        return cfg.n_ctx
    start = cfg.n_ctx_start if cfg.n_ctx_start is not None else DEFAULT_START_CTX
    return min(cfg.n_ctx, start)


def ttl_seconds(cfg: ModelConfig) -> float | None:
    """``cfg.ttl`` in seconds (None: no ttl). Call after :func:`check_profile`."""
    return None if cfg.ttl is None else parse_duration(cfg.ttl)


def check_aliases(models: Mapping[str, ModelConfig], source: str) -> None:
    """Each alias is a new name, given once."""
    seen: dict[str, str] = {}
    for name, cfg in models.items():
        for alias in cfg.aliases:
            taken = alias in models or alias in seen
            if not alias.strip() or taken:
                other = seen.get(alias, alias)
                why = "is empty" if not alias.strip() else f"is already the name of {other!r}"
                raise ProfileError(f"{source}: `models.{name}.aliases`: {alias!r} {why}")
            seen[alias] = name


def _check_ttl(name: str, cfg: ModelConfig, source: str) -> None:
    """``ttl``: a duration, not negative."""
    if cfg.ttl is not None:
        try:
            seconds = parse_duration(cfg.ttl)
        except DurationError:
            seconds = -1.0
        if seconds < 0 or seconds == FOREVER:
            raise ProfileError(
                f"{source}: `models.{name}.ttl` = {cfg.ttl!r}: give seconds (300) or a duration "
                '("5m", "1h30m"); leave it out to keep the model until the budget needs room'
            )


def check_model(name: str, cfg: ModelConfig, source: str) -> None:
    """The checks of one ``[models.NAME]`` that types alone cannot express.

    Raises:
        ProfileError: naming ``source``, the field and what to write instead.
    """
    if sum(x is not None for x in (cfg.path, cfg.bundled, cfg.api_base)) != 1:
        raise ProfileError(
            f"{source}: `models.{name}` needs exactly one of `path`, `bundled` or `api_base`"
        )
    if cfg.n_ctx < 64 or cfg.n_batch < 1:
        raise ProfileError(f"{source}: `models.{name}`: n_ctx must be >= 64, n_batch >= 1")
    if cfg.n_ctx_start is not None and not 64 <= cfg.n_ctx_start <= cfg.n_ctx:
        raise ProfileError(
            f"{source}: `models.{name}.n_ctx_start` = {cfg.n_ctx_start} must be >= 64 and at "
            f"most n_ctx ({cfg.n_ctx}, the most the model is loaded with)"
        )
    _check_remote(name, cfg, source)
    _check_gpu(name, cfg, source)
    _check_ttl(name, cfg, source)
