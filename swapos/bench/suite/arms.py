"""The arms of a suite run and how one system runs one task in one of them.

Shared by the local runner (:mod:`swapos.bench.suite.session`) and the Ray workers
(:mod:`swapos.cluster.worker`), so an arm means the same thing in both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TypeVar

import msgspec

from swapos.actors.handle import TaskOutcome
from swapos.actors.system import System
from swapos.data.task import Task
from swapos.errors import SwapOSError
from swapos.models.profile import (
    REMOVED_PIPELINE_FIELDS,
    Mode,
    ModelConfig,
    PipelineConfig,
    Profile,
)
from swapos.pipeline.routing import OPEN_ROLE

ARMS = ("pipeline", "single")
MODEL_KNOBS = ("draft",)
"""Knobs of a ``pipeline:<knobs>`` arm that are set on every model of the profile, not in its
``[pipeline]``: ``draft=off`` decodes without drafting (the plain arm of issue 26)."""
ROLE_KNOB = "roles."
"""The prefix of a ``pipeline:<knobs>`` arm's knob that sets a role of the profile, not a
``[pipeline]`` field: ``roles.open=large`` (the model named must be one of the profile's)."""
SINGLE_SKIP_REASON = 10**9
"""``skip_reason_max_difficulty`` of the single arm: the router never plans."""

_Settings = TypeVar("_Settings", PipelineConfig, ModelConfig)


def arm_choices(profile: Profile) -> tuple[str, ...]:
    """The arms ``profile`` allows by name: :data:`ARMS`, and ``single:<model>`` for each of
    its models (one shot of that model instead of the ``code`` role's). Any
    ``pipeline:<knob>=<value>[+<knob>=<value>...]`` is allowed too (:func:`split_knobs`)."""
    return (*ARMS, *(f"single:{name}" for name in profile.models))


def parse_arms(text: str, profile: Profile) -> list[str]:
    """A comma-separated list of arms, each one of :func:`arm_choices` or a
    ``pipeline:<knobs>`` arm, deduplicated.

    Raises:
        SwapOSError: an unknown or empty arm, or a knob the pipeline does not have or a
            value it cannot take (the message lists the choices).
    """
    names = list(dict.fromkeys(n.strip() for n in text.split(",")))
    valid = arm_choices(profile)
    unknown = [n for n in names if n not in valid and not n.startswith("pipeline:")]
    if unknown or not names or "" in names:
        raise SwapOSError(
            f"unknown arm {', '.join(map(repr, unknown)) or repr(text)}; choose from "
            f"{', '.join(valid)} or pipeline:KNOB=VALUE[+KNOB=VALUE] (comma-separated)"
        )
    for name in names:
        arm_profile(profile, name)  # a knob arm's knobs are checked here
    return names


class Knobs(msgspec.Struct, frozen=True, kw_only=True):
    """The settings of a ``pipeline:<knobs>`` arm, by where they go (:func:`split_knobs`)."""

    pipeline: dict[str, str]
    model: dict[str, str]
    roles: dict[str, str]


def split_knobs(knobs: str, arm: str) -> Knobs:
    """The ``<knob>=<value>`` settings of ``knobs`` (joined by ``+``): a :data:`MODEL_KNOBS`
    name is a model knob, a :data:`ROLE_KNOB` one a role, any other a ``[pipeline]`` one.

    Raises:
        SwapOSError: an item that is not ``knob=value``.
    """
    split = Knobs(pipeline={}, model={}, roles={})
    for item in knobs.split("+"):
        knob, eq, value = (part.strip() for part in item.partition("="))
        if not eq or not knob or knob == ROLE_KNOB:
            raise SwapOSError(f"arm {arm!r}: {item!r} is not KNOB=VALUE")
        if knob.startswith(ROLE_KNOB):
            split.roles[knob.removeprefix(ROLE_KNOB)] = value
        else:
            (split.model if knob in MODEL_KNOBS else split.pipeline)[knob] = value
    return split


def role_knobs(profile: Profile, changes: dict[str, str], arm: str) -> dict[str, str]:
    """``profile``'s roles with the roles of ``changes`` (:func:`split_knobs`) set.

    Raises:
        SwapOSError: a model the profile does not have.
    """
    unknown = [model for model in changes.values() if model not in profile.models]
    if unknown:
        raise SwapOSError(
            f"arm {arm!r}: the profile has no model {unknown[0]!r}; roles name one of "
            f"{', '.join(profile.models)}"
        )
    return {**profile.roles, **changes}


def pipeline_knobs(pipeline: PipelineConfig, changes: dict[str, str], arm: str) -> PipelineConfig:
    """``pipeline`` with the ``[pipeline]`` knobs of ``changes`` (:func:`split_knobs`) set; a
    list knob's items are separated by :data:`LIST_SEPARATOR`.

    Raises:
        SwapOSError: a knob the pipeline does not have (neither is it a model knob), one it
            no longer has, or a bad value.
    """
    names = [f.name for f in msgspec.structs.fields(pipeline)]
    removed = [k for k in changes if k in REMOVED_PIPELINE_FIELDS]
    if removed:
        name = removed[0]
        raise SwapOSError(f"arm {arm!r}: `{name}` was removed: {REMOVED_PIPELINE_FIELDS[name]}")
    unknown = [k for k in changes if k not in names]
    if unknown:
        raise SwapOSError(
            f"arm {arm!r}: {unknown[0]!r} is not KNOB=VALUE with a [pipeline] knob, a model "
            f"knob or a role; the knobs: {', '.join((*names, *MODEL_KNOBS))}, {ROLE_KNOB}ROLE"
        )
    lists = {k: _listed(v) for k, v in changes.items() if isinstance(getattr(pipeline, k), list)}
    return with_settings(pipeline, {**changes, **lists}, arm)


LIST_SEPARATOR = "/"
"""What separates the items of a list knob's value: ``pipeline:passes=examples/open_asked``
(``pipeline:passes=``: none, the core alone)."""


def _listed(value: str) -> list[str]:
    return [item for item in (i.strip() for i in value.split(LIST_SEPARATOR)) if item]


def model_knobs(
    models: dict[str, ModelConfig], changes: dict[str, str], arm: str
) -> dict[str, ModelConfig]:
    """``models`` with the model knobs of ``changes`` (:func:`split_knobs`) set on every
    model.

    Raises:
        SwapOSError: a value the model's field cannot take.
    """
    if not changes:
        return models
    return {name: with_settings(model, changes, arm) for name, model in models.items()}


def with_settings(settings: _Settings, changes: Mapping[str, object], arm: str) -> _Settings:
    """``settings`` with the fields of ``changes`` set, each value read as its field's type
    (``true``/``false``, a number).

    Raises:
        SwapOSError: a value its field cannot take.
    """
    fields = msgspec.structs.asdict(settings)
    try:
        return msgspec.convert({**fields, **changes}, type(settings), strict=False)
    except msgspec.ValidationError as exc:
        raise SwapOSError(f"arm {arm!r}: {exc}") from None


def is_single(arm: str) -> bool:
    """Whether ``arm`` is a one-shot arm (``single`` or ``single:<model>``)."""
    return arm == "single" or arm.startswith("single:")


SystemFactory = Callable[[Profile, Mode, Path], AbstractAsyncContextManager[System]]
"""Opens the system of one mode/arm: ``(profile, mode, events_path) -> System``."""


def arm_profile(profile: Profile, arm: str) -> Profile:
    """``profile`` for ``arm``: unchanged for ``pipeline``; for ``pipeline:<knobs>``, its
    knobs split by :func:`split_knobs` and set on its ``[pipeline]`` (:func:`pipeline_knobs`:
    the same pipeline with one lever changed, so both run interleaved in one run), on every
    model (:func:`model_knobs`) and on its roles (:func:`role_knobs`); for ``single``, one
    code attempt and no reason phase (so: code, grade), written by the ``code`` model
    whatever the task (no ``open`` role); for ``single:<model>`` the same, written by that
    model (the ``code`` and ``fix`` roles point to it).

    Raises:
        SwapOSError: ``<model>`` is not one of the profile's models, or a knob is unknown or
            its value bad.
    """
    if arm == "pipeline":
        return profile
    if arm.startswith("pipeline:"):
        knobs = split_knobs(arm.partition(":")[2], arm)
        return msgspec.structs.replace(
            profile,
            pipeline=pipeline_knobs(profile.pipeline, knobs.pipeline, arm),
            models=model_knobs(profile.models, knobs.model, arm),
            roles=role_knobs(profile, knobs.roles, arm),
        )
    pipeline = msgspec.structs.replace(
        profile.pipeline, max_attempts=1, skip_reason_max_difficulty=SINGLE_SKIP_REASON
    )
    roles = {role: model for role, model in profile.roles.items() if role != OPEN_ROLE}
    if arm.startswith("single:"):
        model = arm.partition(":")[2]
        if model not in profile.models:
            raise SwapOSError(
                f"arm {arm!r}: the profile has no model {model!r}; "
                f"choose from {', '.join(arm_choices(profile))}"
            )
        roles = {**roles, "code": model, "fix": model}
    return msgspec.structs.replace(profile, pipeline=pipeline, roles=roles)


async def run_triple(
    system: System,
    task: Task,
    arm: str,
    *,
    max_attempts: int | None,
    next_task: Task | None,
) -> TaskOutcome:
    """Run ``task`` on ``system`` (one mode/arm): the single arm gets one code attempt."""
    attempts = 1 if is_single(arm) else max_attempts
    return await system.run_task(task, max_attempts=attempts, next_task=next_task)
