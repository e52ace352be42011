"""Rendering a (compressed) capsule into prompt sections.

The sections are small markdown documents that a base model continues naturally
(``## Task``, ``## Plan``, fenced code). Each function renders one section of a
:class:`~swapos.capsule.compress.CapsuleView` and returns ``""`` when there is nothing to show,
so callers assemble prompts with :func:`join_sections`. :func:`render_capsule` is the default
assembly: stable sections (goal, constraints, plan) first, changing ones (attempts, feedback)
last, so a KV prefix cache hits on retries.
"""

from __future__ import annotations

from typing import Final

import msgspec

from swapos.capsule.compress import CapsuleView, CountTokens, compress
from swapos.capsule.schema import Capsule, Feedback

TITLES: Final[dict[str, str]] = {
    "grader": "## Test output",
    "critic": "## Review",
    "selfcheck": "## Docstring examples",
}
"""The heading of each feedback source in completion-style prompts."""


class RenderedCapsule(msgspec.Struct, frozen=True, kw_only=True):
    """A capsule rendered within a budget.

    Attributes:
        stable: sections that do not change across retries (goal, constraints, plan).
        variable: sections that do (earlier attempts, newest attempt, feedback).
        dropped: what compression left out or shortened (for logs).
    """

    stable: str
    variable: str
    dropped: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """``stable`` followed by ``variable``."""
        return join_sections(self.stable, self.variable)


def join_sections(*sections: str) -> str:
    """Join non-empty sections with one blank line between them."""
    return "\n".join(section for section in sections if section)


def goal_section(view: CapsuleView) -> str:
    """``## Task`` with the goal, whole."""
    return f"## Task\n{view.goal.strip()}\n"


def constraints_section(view: CapsuleView) -> str:
    """``## Constraints`` as a bullet list."""
    if not view.constraints:
        return ""
    return "## Constraints\n" + "".join(f"- {c.strip()}\n" for c in view.constraints)


def plan_section(view: CapsuleView) -> str:
    """``## Plan`` as a numbered list."""
    if not view.plan_steps:
        return ""
    steps = "".join(f"{i}. {step.strip()}\n" for i, step in enumerate(view.plan_steps, 1))
    return "## Plan\n" + steps


def earlier_section(view: CapsuleView) -> str:
    """``## Earlier attempts``: one line each, plus how many are not shown."""
    lines = [f"- {line}\n" for line in view.earlier]
    if view.omitted_attempts:
        count = len(view.omitted_attempts)
        lines.insert(0, f"- ({count} earlier attempt{'s' if count > 1 else ''} not shown)\n")
    return "## Earlier attempts\n" + "".join(lines) if lines else ""


def attempt_section(view: CapsuleView) -> str:
    """``## Attempt N: <status>`` with the newest artifact's code, whole, in a fence."""
    if view.newest is None:
        return ""
    title = f"## Attempt {view.newest.attempt}: {view.newest_status}\n"
    code = view.newest.code.strip("\n")
    if not code.strip():
        return title + "(the answer contained no code)\n"
    return f"{title}```python\n{code}\n```\n"


def feedback_sections(view: CapsuleView) -> str:
    """``## Test output`` (grader) and ``## Review`` (critic) for the newest attempt."""
    return join_sections(*(f"{TITLES[f.source]}\n{f.text.strip()}\n" for f in view.feedback))


def code_block(title: str, code: str) -> str:
    """``title``, an opened ``python`` fence, ``code`` as written, the closing fence: what a
    code prompt's cue (``title`` + opened fence) and the model's answer make together."""
    return f"{title}\n```python\n{code.strip(chr(10))}\n```\n"


def outcome_sections(status: str, feedback: tuple[Feedback, ...]) -> str:
    """``## Test output: <status>`` (grader) and ``## Review`` (critic) of one attempt."""
    sections = []
    for f in feedback:
        title = f"## Test output: {status}" if f.source == "grader" and status else None
        title = title or TITLES[f.source]
        sections.append(f"{title}\n{f.text.strip()}\n")
    return join_sections(*sections)


def render_view(view: CapsuleView) -> RenderedCapsule:
    """The default layout: goal, constraints, plan | earlier, newest attempt, feedback."""
    stable = join_sections(goal_section(view), constraints_section(view), plan_section(view))
    variable = join_sections(earlier_section(view), attempt_section(view), feedback_sections(view))
    return RenderedCapsule(stable=stable, variable=variable, dropped=view.dropped)


def render_capsule(
    capsule: Capsule, *, count_tokens: CountTokens, budget_tokens: int
) -> RenderedCapsule:
    """Render ``capsule`` with the default layout in at most ``budget_tokens`` tokens.

    Raises:
        CapsuleBudgetError: goal and newest artifact alone exceed the budget.
    """
    view = compress(
        capsule,
        count_tokens=count_tokens,
        budget_tokens=budget_tokens,
        layout=lambda v: render_view(v).text,
    )
    return render_view(view)
