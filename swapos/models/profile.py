"""Profiles: which models a pipeline uses, for which roles, under what budget.

A profile is a TOML file decoded straight into the Structs below; an unknown field or a wrong
type is a :class:`~swapos.errors.ProfileError` that names the field. See ``docs/profiles.md``.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Literal, get_args

import msgspec

from swapos.errors import ProfileError
from swapos.models.model_config import (
    ModelConfig,
    PromptStyle,
    check_aliases,
    check_model,
    gpu_layer_count,
    ttl_seconds,
)
from swapos.sysinfo import free_device_bytes

__all__ = [
    "DEVICE_MARGIN",
    "DEVICE_MARGIN_MIN",
    "MODES",
    "REMOVED_PIPELINE_FIELDS",
    "Mode",
    "ModelConfig",
    "PassName",
    "PhaseConfig",
    "PhaseName",
    "PipelineConfig",
    "Profile",
    "PromptStyle",
    "auto_budget",
    "check_profile",
    "decode_profile",
    "device_budget_bytes",
    "gpu_layer_count",
    "load_profile",
    "parse_device_budget",
    "parse_size",
    "ttl_seconds",
]

Mode = Literal["overlap", "lru", "sequential", "resident"]
"""A swap mode (docs/architecture.md, "Modes"): ``overlap`` is SwapOS (prefetch, next-use
eviction); ``lru`` loads on demand and evicts the least recently used idle model when room
is needed (Ollama, the llama.cpp router); ``sequential`` unloads every idle model before
each load (llama-swap without groups); ``resident`` preloads everything (the lower bound)."""

MODES: tuple[Mode, ...] = get_args(Mode)
"""Every mode, in report order (SwapOS first, then its closest peer): the one list that
CLIs, benchmarks and reports use."""
PhaseName = Literal["reason", "code", "critic", "router"]


PassName = Literal["examples", "open_asked", "restore_dropped", "precheck_defects"]
"""A pass a profile may name (``pipeline.passes``; what each does: :mod:`swapos.passes`)."""


class PhaseConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Generation settings of one phase."""

    max_tokens: int = 256
    stop: list[str] = msgspec.field(default_factory=list)
    temperature: float = 0.0
    seed: int = 0
    prompt_budget_tokens: int = 1536


class PipelineConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How a task is conducted through its phases. The retry rules these fields feed are
    written once, in :mod:`swapos.policies.retry` (the rules named in italics below). The
    defaults are the embedded default profile's (``swapos/models/default.toml`` writes
    every field; a test compares the two).

    Attributes:
        max_attempts: code attempts (code phases) per task (*Attempts*).
        skip_reason_max_difficulty: tasks at or under this difficulty skip the plan.
        grade_timeout_s: wall-clock limit of one sandboxed test run.
        selfcheck: check candidates before grading: the examples the passes read, and a
            repository task's starter unchanged (*Pre-grade checks*).
        selfcheck_retries: candidates the checks may send back without a grade (*Sent back*).
        resamples: samples of a candidate that repeats a failed one (*Repeats*).
        resample_temperature: the temperature of resamples and draws (*Repeats*, *Draws*).
        draws: candidates a failed check may draw from the same prompt (*Draws*); 0: none.
        second_opinion: a failed attempt 1 is followed by the ``fix`` model's own answer to
            the first prompt, when that is another model than ``code`` (*Second opinion*).
        side_by_side: a failed check's draws decode side by side when the draws policy says
            it pays (:mod:`swapos.policies.draws`, on the model's measured cost curve); off:
            always in turn.
        passes: the heuristics over briefs and answers the conductor runs, by name (what
            each does, and the measurement that earned it its place: :mod:`swapos.passes`);
            ``[]``: the core alone.
        task_seconds: what a task may spend on its answers, in seconds at the models'
            measured costs (*Spend*); 0: no limit.
        task_budget: what a task may spend on its answers, as a multiple of its first code
            answer's cost (*Spend*: tokens at each model's measured costs); 0: no limit.
        draw_seconds: what an attempt's draws may cost in all, in seconds at the models'
            measured costs (*Spend*: long answers get fewer draws); 0: no limit.
        stale_draws: an attempt's draws stop once this many in a row brought nothing new
            (*Draws*); 0: never.
        stop_same_failure: a fix whose grade fails with the very test output of the grade
            before it ends the task (*Grade*).
        reserve_next: an attempt's draws leave the task's spend limit room for the next
            attempt's first answer, at its model's costs (*Spend*), so a weak model's draws
            never spend what the stronger fixer needs.
        price_attempts: with a spend limit, a next attempt is priced by the prompt it sends
            before it is asked (*Spend*: a fix's prompt carries the earlier attempts).
        count_wall: the task's spend is at least its wall-clock so far (*Spend*: grades,
            checks, loads and the estimates' error are spent too).
    """

    max_attempts: int = 3
    skip_reason_max_difficulty: int = 2
    grade_timeout_s: float = 30.0
    selfcheck: bool = True
    selfcheck_retries: int = 1
    resamples: int = 1
    resample_temperature: float = 0.8
    draws: int = 6
    second_opinion: bool = True
    side_by_side: bool = True
    passes: list[PassName] = msgspec.field(
        default_factory=lambda: ["examples", "open_asked", "restore_dropped", "precheck_defects"]
    )
    task_seconds: float = 90.0
    task_budget: float = 0.0
    draw_seconds: float = 60.0
    stale_draws: int = 0
    stop_same_failure: bool = False
    reserve_next: bool = False
    price_attempts: bool = True
    count_wall: bool = True


_MEASURED = "measured not to help: {}; delete it from the profile"
_A_PASS = "it is the `{}` pass now: list the passes to run in `pipeline.passes`"
REMOVED_PIPELINE_FIELDS: dict[str, str] = {
    "critic": _MEASURED.format("the 1.5B's reviews rescued nothing the test output did not"),
    "check_reviews": _MEASURED.format("it checked the critic's reviews, removed with it"),
    "focus_fix": _MEASURED.format("focus prompts passed no more tasks"),
    "edit": _MEASURED.format("edit answers passed no more tasks"),
    "redraw_unchanged": _MEASURED.format('draws told "unchanged" passed no more tasks'),
    "draws_stop_repeats": _MEASURED.format(
        "stopping repeated draws passed no more tasks (`stale_draws` stops them by the same "
        "count, within the *Draws* rule)"
    ),
    "restore_dropped": _A_PASS.format("restore_dropped"),
    "precheck_defects": _A_PASS.format("precheck_defects"),
    "open_asked": _A_PASS.format("open_asked"),
}
"""``[pipeline]`` fields that were removed, and why (the runs that measured them are listed
in docs/results/README.md): a profile that still sets one is an error that says so."""


class Profile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A whole profile, as written in TOML.

    Attributes:
        name: a label for reports.
        budget: the memory budget for resident models: bytes, a size string such as
            ``"1.5GiB"`` or ``"800MB"``, or ``"auto"`` (half of the available memory).
        device_budget: the GPU memory budget for offloaded layers and their KV caches:
            bytes, a size string, or ``"auto"`` (the free memory of llama.cpp's GPU devices
            less a margin, :data:`DEVICE_MARGIN`). Used only when a model sets
            ``gpu_layers``.
        mode: the default swap mode.
        models: models by name.
        roles: phase name -> model name (``reason``, ``code``, ``critic``, and ``fix``: the
            coder of attempts after the first; default: the ``code`` model; ``open``: the
            coder of a task whose first request is opened with the definition its brief
            asks for, read by the ``open_asked`` pass; default: the ``code`` model).
        phases: per-phase generation settings.
        pipeline: attempts and routing rules.
    """

    name: str = "profile"
    budget: int | str = "auto"
    device_budget: int | str = "auto"
    mode: Mode = "overlap"
    models: dict[str, ModelConfig] = msgspec.field(default_factory=dict)
    roles: dict[str, str] = msgspec.field(default_factory=dict)
    phases: dict[str, PhaseConfig] = msgspec.field(default_factory=dict)
    pipeline: PipelineConfig = msgspec.field(default_factory=PipelineConfig)

    def phase(self, name: str) -> PhaseConfig:
        """Settings of phase ``name`` (defaults when the profile does not set them)."""
        return self.phases.get(name, PhaseConfig())


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(value: int | str, *, field: str = "budget") -> int:
    """Bytes from an int or a size string (``"1.5GiB"``, ``"800MB"``, ``"auto"``).

    Raises:
        ProfileError: the string is not a size; the message names ``field``.
    """
    if isinstance(value, int):
        if value <= 0:
            raise ProfileError(f"`{field}` must be positive, got {value}")
        return value
    if value.strip().lower() == "auto":
        return auto_budget()
    match = _SIZE.match(value)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ProfileError(
            f"`{field}` = {value!r} is not a size: write bytes (1500000000), a size such as "
            f'"1.5GiB" or "800MB", or "auto"'
        )
    return int(float(match.group(1)) * _UNITS[unit])


def auto_budget() -> int:
    """Half of the memory available right now (``MemAvailable``), at least 512 MiB."""
    try:
        text = Path("/proc/meminfo").read_text()
        kib = int(re.search(r"MemAvailable:\s+(\d+)", text).group(1))  # type: ignore[union-attr]
        available = kib * 1024
    except (OSError, AttributeError):
        available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    return max(available // 2, 512 * 2**20)


DEVICE_MARGIN = 0.1
"""``device_budget = "auto"`` leaves this share of the GPUs' free memory (at least
:data:`DEVICE_MARGIN_MIN`) to llama.cpp's own buffers and to other processes."""
DEVICE_MARGIN_MIN = 256 * 2**20


def parse_device_budget(value: int | str, *, free: Callable[[], int] | None = None) -> int:
    """Bytes of the GPU memory budget from the profile's ``device_budget``.

    ``"auto"`` is the free memory of llama.cpp's GPU devices (``free()``; default
    :func:`swapos.sysinfo.free_device_bytes`) less :data:`DEVICE_MARGIN`, at least
    :data:`DEVICE_MARGIN_MIN`; 0 on a machine without a GPU.

    Raises:
        ProfileError: not a size; the message names ``device_budget``.
    """
    if isinstance(value, str) and value.strip().lower() == "auto":
        total = (free or free_device_bytes)()
        return max(0, total - max(int(total * DEVICE_MARGIN), DEVICE_MARGIN_MIN))
    return parse_size(value, field="device_budget")


def device_budget_bytes(profile: Profile, *, offloading: bool, unlimited: int = 0) -> int:
    """The system's GPU budget: 0 when no model offloads layers (nothing is asked of the
    device, and no device is queried), ``unlimited`` when set (``resident`` mode's
    lower bound, as for host memory), else the profile's ``device_budget``."""
    if not offloading:
        return 0
    return unlimited or parse_device_budget(profile.device_budget)


def decode_profile(text: str | bytes, *, source: str = "<profile>") -> Profile:
    """Decode a profile from TOML text.

    Raises:
        ProfileError: syntax error, unknown field or wrong type; names ``source`` and the
            field path, e.g. ``$.models.coder.n_ctx``.
    """
    try:
        data = tomllib.loads(text.decode() if isinstance(text, bytes) else text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{source}: not valid TOML ({exc}); fix the syntax") from exc
    _check_removed(data, source)
    try:
        profile = msgspec.convert(data, Profile)
    except msgspec.ValidationError as exc:
        _check_named_tables(data, source)  # raises naming the table, if the error is in one
        raise ProfileError(
            f"{source}: {exc}. See docs/profiles.md for the fields a profile may have."
        ) from exc
    check_profile(profile, source=source)
    return profile


def _check_removed(data: dict[str, object], source: str) -> None:
    """A ``[pipeline]`` field of :data:`REMOVED_PIPELINE_FIELDS` is an error naming it."""
    pipeline = data.get("pipeline")
    if not isinstance(pipeline, dict):
        return
    for name in pipeline:
        if name in REMOVED_PIPELINE_FIELDS:
            raise ProfileError(
                f"{source}: `pipeline.{name}` was removed: {REMOVED_PIPELINE_FIELDS[name]}"
            )


def _check_named_tables(data: dict[str, object], source: str) -> None:
    """Validate each ``[models.NAME]`` and ``[phases.NAME]`` on its own, so an error names
    the table (msgspec writes a dict's keys as ``[...]``: ``$.models[...]``). Run only once
    the whole profile failed to convert, to say where."""
    for section, cls in (("models", ModelConfig), ("phases", PhaseConfig)):
        table = data.get(section)
        if not isinstance(table, dict):
            continue
        for name, value in table.items():
            try:
                msgspec.convert(value, cls)
            except msgspec.ValidationError as exc:
                where = f"$.{section}.{name}"
                text = str(exc)
                text = (
                    text.replace(" - at `$", f" - at `{where}", 1)
                    if " - at `$" in text
                    else f"{text} - at `{where}`"
                )
                raise ProfileError(
                    f"{source}: {text}. See docs/profiles.md for the fields a profile may have."
                ) from exc


def load_profile(path: str | os.PathLike[str]) -> Profile:
    """Read and decode the profile at ``path`` (relative model paths resolve against it).

    Raises:
        ProfileError: the file is missing or invalid.
    """
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise ProfileError(f"cannot read profile {file}: {exc.strerror}; check the path") from exc
    profile = decode_profile(text, source=str(file))
    models = {
        name: msgspec.structs.replace(cfg, path=str((file.parent / cfg.path).resolve()))
        if cfg.path is not None
        else cfg
        for name, cfg in profile.models.items()
    }
    return msgspec.structs.replace(profile, models=models)


def check_profile(profile: Profile, *, source: str = "<profile>") -> None:
    """Cross-field checks that types alone cannot express."""
    if not profile.models:
        raise ProfileError(f"{source}: `models` is empty; declare at least one [models.NAME]")
    check_aliases(profile.models, source)
    for name, cfg in profile.models.items():
        check_model(name, cfg, source)
    for role, model in profile.roles.items():
        if model not in profile.models:
            raise ProfileError(
                f"{source}: `roles.{role}` = {model!r} is not one of the models "
                f"({', '.join(sorted(profile.models))})"
            )
    p = profile.pipeline
    if p.max_attempts < 1:
        raise ProfileError(f"{source}: `pipeline.max_attempts` must be at least 1")
    if min(p.selfcheck_retries, p.resamples, p.draws) < 0:
        raise ProfileError(
            f"{source}: `pipeline.selfcheck_retries`, `pipeline.resamples` and "
            "`pipeline.draws` must be >= 0"
        )
    if p.resample_temperature <= 0:
        raise ProfileError(f"{source}: `pipeline.resample_temperature` must be > 0")
    parse_size(profile.budget)
    if not (isinstance(profile.device_budget, str) and profile.device_budget.lower() == "auto"):
        try:
            parse_device_budget(profile.device_budget)
        except ProfileError as exc:
            raise ProfileError(f"{source}: {exc}") from exc
