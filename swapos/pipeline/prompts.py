"""Prompts for the reason and code phases of a base model.

A base model continues a document, not an instruction: ``## Task``, ``## Starter
solution.py`` in a fence, ``## Plan``, the last attempt with its test output, and finally an
opened fence (```` ```python ````) or ``## Plan`` heading for the model to fill in.

Every prompt is split in two: :attr:`Prompt.stable` (brief, constraints, starter code, plan:
identical on every attempt of a task) comes first and :attr:`Prompt.variable` (the attempts,
test output, the cue) last.

The variable part is *append-only* across attempts, so that a KV prefix cache re-reads only
what changed on a retry: each attempt is shown as the code prompt's cue (``## solution.py``
or ``## Fixed solution.py`` and an opened fence) followed by the code as the model wrote it
and the closing fence, then its test output. So the code prompt of attempt N begins with
exactly what the coder read *and wrote* on attempt N-1 (prompt + answer, whose KV state the
Generator saved). Only when the budget forces compression do earlier attempts collapse to
one-line summaries (oldest first), which shortens the reusable prefix.

``completion`` tasks (HumanEval style) end the code prompt with the function prompt itself,
which the model continues; their stable part leaves the starter out (it comes at the end).

A fixer that starts from an earlier, better candidate than the newest (the retry policy's
*Best candidate* rule) reads it after the history, under ``## Start again from attempt N``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, Literal

import msgspec

from swapos.capsule.compress import CapsuleView, CountTokens, compress
from swapos.capsule.render import (
    code_block,
    constraints_section,
    earlier_section,
    goal_section,
    join_sections,
    outcome_sections,
    plan_section,
)
from swapos.capsule.schema import Capsule, new_capsule
from swapos.data.task import Task
from swapos.pipeline.fix_context import Base, base_of

Phase = Literal["reason", "code"]

PLAN_CUE: Final = "1."
REASON_STOP: Final[tuple[str, ...]] = ("\n\n", "\n#", "```")
CODE_STOP: Final[tuple[str, ...]] = ("\n```",)
COMPLETION_STOP: Final[tuple[str, ...]] = (
    "\n```",
    "\ndef ",
    "\nclass ",
    "\nif __name__",
    "\nprint(",
    "\n#",
)


class Prompt(msgspec.Struct, frozen=True, kw_only=True):
    """A prompt, split for KV prefix reuse.

    Attributes:
        stable: the part that is the same on every attempt of the task; comes first.
        variable: the part that changes between attempts; comes last and ends with the cue.
        stop: stop sequences for this phase.
        answer_prefix: the start of the answer the prompt already wrote (e.g. ``"1."``);
            :func:`~swapos.pipeline.extract.extract_plan` reads ``answer_prefix + output``
            best (it also accepts the bare output).
        dropped: what budget compression left out or shortened (for logs).
        chat: rendered with a chat template: its special tokens (``<|im_start|>``...) are
            tokens, not text.
        opening: what the prompt already wrote of the answer, beyond ``answer_prefix``
            (a chat coder's turn opened with the function it completes): the answer as the
            model's turn reads is ``opening + output``.
        edit_base: the code an *edit* answer is spliced into (the prompt asked for only the
            definitions that change; the pass that opened it splices it back); None: the
            answer is the whole file.
    """

    stable: str
    variable: str
    stop: tuple[str, ...]
    answer_prefix: str = ""
    dropped: tuple[str, ...] = ()
    chat: bool = False
    opening: str = ""
    edit_base: str | None = None

    @property
    def text(self) -> str:
        """The full prompt: ``stable + variable``."""
        return self.stable + self.variable


def default_constraints(task: Task) -> tuple[str, ...]:
    """Rules every answer of this task's category must follow."""
    if task.category == "completion":
        return ()
    rules = ["Keep the names and signatures of the starter code; the tests import them."]
    if task.category == "refactor":
        rules.append("Do not change what the code does.")
    return tuple(rules)


def capsule_for_task(task: Task) -> Capsule:
    """A fresh capsule for ``task``: goal = the brief, constraints from its category."""
    return new_capsule(
        task_id=task.task_id,
        category=task.category,
        goal=task.problem.strip() or task.meta.description.strip(),
        difficulty=task.meta.difficulty,
        constraints=default_constraints(task),
    )


def build_prompt(
    phase: Phase,
    task: Task,
    capsule: Capsule,
    count_tokens: CountTokens,
    budget_tokens: int,
    *,
    base: int = 0,
) -> Prompt:
    """Build the prompt of ``phase`` for ``task`` in at most ``budget_tokens`` tokens.

    Args:
        phase: ``"reason"`` or ``"code"`` (its completion variant for ``completion`` tasks).
        task: the task (starter code, category).
        capsule: the task's state; the newest artifact is the attempt to fix.
        count_tokens: the reading model's tokenizer.
        budget_tokens: the most tokens the prompt may take (``n_ctx`` minus the phase's
            ``max_tokens``).
        base: the code prompt starts from that attempt's candidate (*Best candidate*; 0: the
            newest).

    Raises:
        ValueError: ``phase`` is not one of the two.
        CapsuleBudgetError: goal, starter and newest attempt alone exceed the budget.
    """
    start = base_of(capsule, base)
    code: Assembler = lambda t, v: _code(t, v, start)  # noqa: E731
    assemblers = {**_ASSEMBLERS, "code": code}
    return compose(phase, task, capsule, count_tokens, budget_tokens, assemblers)


Assembler = Callable[[Task, CapsuleView], Prompt]
"""Lays out one phase's prompt from a (compressed) capsule view."""


def compose(  # noqa: PLR0917  (build_prompt's arguments, and the layouts)
    phase: Phase,
    task: Task,
    capsule: Capsule,
    count_tokens: CountTokens,
    budget_tokens: int,
    assemblers: Mapping[str, Assembler],
) -> Prompt:
    """The prompt of ``phase`` laid out by ``assemblers[phase]``, the capsule compressed until
    it fits ``budget_tokens`` (see :func:`build_prompt`)."""
    if phase not in assemblers:
        raise ValueError(f"no prompt for phase {phase!r}; expected reason or code")
    assemble = assemblers[phase]
    view = compress(
        capsule,
        count_tokens=count_tokens,
        budget_tokens=budget_tokens,
        layout=lambda v: assemble(task, v).text,
        whole_history=phase != "reason",
    )
    return assemble(task, view)


def _stable(task: Task, view: CapsuleView, *, phase: Phase) -> str:
    completion = task.category == "completion"
    goal = view.goal.strip()
    show_goal = not (completion and goal and goal in task.starter)
    show_starter = not completion or phase == "reason"
    sections = [
        goal_section(view) if show_goal else "",
        constraints_section(view),
        _starter_section(task) if show_starter else "",
        plan_section(view) if phase != "reason" else "",
    ]
    return join_sections(*sections)


def _starter_section(task: Task) -> str:
    title = "## Function to complete" if task.category == "completion" else "## Starter solution.py"
    code = task.starter.strip("\n")
    return f"{title}\n```python\n{code}\n```\n" if code.strip() else ""


def _title(attempt: int) -> str:
    """The heading of attempt ``attempt``'s code (the same in its cue and in later prompts)."""
    return "## solution.py" if attempt <= 1 else "## Fixed solution.py"


def _history(view: CapsuleView) -> str:
    """Earlier attempts (summaries, then whole ones) and the newest attempt, each as its code
    block followed by its outcome."""
    whole = [
        join_sections(
            code_block(_title(a.artifact.attempt), a.artifact.code),
            outcome_sections(a.status, a.feedback),
        )
        for a in view.whole
    ]
    newest = ""
    if view.newest is not None:
        newest = join_sections(
            code_block(_title(view.newest.attempt), view.newest.code),
            outcome_sections(view.newest_status, view.feedback),
        )
    return join_sections(earlier_section(view), *whole, newest)


def _after(stable: str, variable: str) -> str:
    """``variable``, separated from a non-empty ``stable`` by a blank line."""
    return "\n" + variable if stable else variable


def _reason(task: Task, view: CapsuleView) -> Prompt:
    stable = _stable(task, view, phase="reason")
    variable = _after(stable, "## Plan\n" + PLAN_CUE)
    return Prompt(
        stable=stable,
        variable=variable,
        stop=REASON_STOP,
        answer_prefix=PLAN_CUE,
        dropped=view.dropped,
    )


def _code(task: Task, view: CapsuleView, base: Base | None = None) -> Prompt:
    stable = _stable(task, view, phase="code")
    cue, stop = _cue(task, view)
    again = ""
    if base is not None:
        again = code_block(f"## Start again from attempt {base.attempt}\n{base.note()}", base.code)
    variable = _after(stable, join_sections(_history(view), again, cue))
    return Prompt(stable=stable, variable=variable, stop=stop, dropped=view.dropped)


def _cue(task: Task, view: CapsuleView) -> tuple[str, tuple[str, ...]]:
    title = _title(view.newest.attempt + 1 if view.newest is not None else 1)
    if task.category == "completion":
        return f"{title}\n```python\n{task.starter}", COMPLETION_STOP
    return f"{title}\n```python\n", CODE_STOP


_ASSEMBLERS: Final[dict[str, Assembler]] = {
    "reason": _reason,
    "code": _code,
}
