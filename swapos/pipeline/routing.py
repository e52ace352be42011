"""The Router's rules for a task: which phases run, on which models. Pure decisions."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from swapos.data.task import Task
from swapos.models.profile import Profile
from swapos.pipeline.hooks import NO_PASSES, Brief, ExampleCheck, Passes

PHASES = ("reason", "code", "fix")
"""The model roles a plan assigns; ``fix`` is the coder of attempts after the first."""
OPEN_ROLE = "open"
"""The role that, when a profile sets it, writes the first answer of a task whose first
request is opened with the definition its brief asks for (the brief's opening, read by a
pass: :attr:`swapos.pipeline.hooks.Brief.opening`): that task's ``code`` model
(:func:`route`)."""


@dataclass(frozen=True)
class RoutePlan:
    """What the Router decided for a task, with the reasons (recorded as events), and what
    the passes read of its brief."""

    reason: bool
    models: dict[str, str]
    why: list[str]
    brief: Brief = field(default_factory=Brief)

    @property
    def examples(self) -> ExampleCheck | None:
        """The examples each candidate is checked against before its grade (None: none)."""
        return self.brief.examples


def model_for(profile: Profile, phase: str) -> str:
    """The model a phase runs on: its role in the profile, else the ``code`` role, else the
    first model declared."""
    return profile.roles.get(phase) or profile.roles.get("code") or next(iter(profile.models))


def route(task: Task, profile: Profile, passes: Passes = NO_PASSES) -> RoutePlan:
    """Plan ``task``: skip ``reason`` for completion tasks and for tasks at or under the
    profile's ``skip_reason_max_difficulty``; self-check against the examples ``passes``
    read of the docstring or brief when the profile allows it and the task has some; pick
    each phase's model from the roles, the ``code`` model from the :data:`OPEN_ROLE` role
    when the profile sets one and the task's first request is opened (:func:`opened_by`).
    """
    brief = passes.brief(task)
    why: list[str] = []
    reason = True
    if task.category == "completion":
        reason = False
        why.append("skip reason: completion task, the prompt is the plan")
    elif task.meta.difficulty <= profile.pipeline.skip_reason_max_difficulty:
        reason = False
        why.append(
            f"skip reason: difficulty {task.meta.difficulty} <= "
            f"skip_reason_max_difficulty {profile.pipeline.skip_reason_max_difficulty}"
        )
    else:
        why.append(f"plan first: difficulty {task.meta.difficulty}")
    examples = brief.examples if profile.pipeline.selfcheck else None
    if examples is not None:
        why.append(f"self-check: {examples.count} {examples.where} examples run before grading")
    models = {p: model_for(profile, p) for p in PHASES}
    opened = opened_by(task, profile, brief)
    if opened is not None and opened.model != models["code"]:
        why.append(
            f"the first answer opens {opened.opening!r}: code -> {opened.model} (roles.{OPEN_ROLE})"
        )
        models["code"] = opened.model
    why.extend(f"{p} -> {m}" for p, m in models.items() if p != "reason" or reason)
    return RoutePlan(
        reason=reason, models=models, why=why, brief=Brief(examples=examples, opening=brief.opening)
    )


class Opened(msgspec.Struct, frozen=True, kw_only=True):
    """Who writes an opened first answer, and what it opens with."""

    model: str
    opening: str


def opened_by(task: Task, profile: Profile, brief: Brief) -> Opened | None:
    """The model of the :data:`OPEN_ROLE` role and the opening, when ``profile`` sets that
    role and ``brief`` has an opening (a pass read a definition ``task``'s brief asks to
    add); else ``None``. A model whose API cannot continue a turn still writes that first
    answer, asked without the opening."""
    model = profile.roles.get(OPEN_ROLE)
    if model is None or task.category == "completion" or not brief.opening:
        return None
    return Opened(model=model, opening=brief.opening)


def first_use(task: Task, profile: Profile, passes: Passes = NO_PASSES) -> tuple[str, str]:
    """The first generate phase of ``task`` and its model: ``reason`` when its plan has
    one, else ``code``. What a caller announcing ``task`` as the next one lets the
    Prefetcher bring in early (``System.run_task(..., next_task=...)``)."""
    plan = route(task, profile, passes)
    phase = "reason" if plan.reason else "code"
    return phase, plan.models[phase]
