"""Compression of a capsule to a token budget.

:func:`compress` turns a :class:`~swapos.capsule.schema.Capsule` into a :class:`CapsuleView`:
what a prompt shows of it. The caller supplies the *layout* (view -> full prompt text, so
scaffolding and starter code are counted too) and the tokenizer (``count_tokens``).

The goal and the newest artifact are never shortened. Everything else degrades one step at a
time, in this fixed order, until the layout fits the budget:

1. earlier attempts, oldest first: summary (status + one feedback line) -> status only;
2. the newest attempt's feedback: full -> shortened (key lines, capped);
3. earlier attempts, oldest first: dropped (counted in ``omitted_attempts``);
4. the plan: dropped;
5. the newest attempt's feedback: shortened -> one line each;
6. the constraints: dropped;
7. the newest attempt's feedback: dropped.

With ``whole_history=True`` (the code prompts, which are append-only so that a
retry extends the previous prompt and answer and the KV prefix cache re-reads only what
changed) earlier attempts start *whole* (code and feedback, as they were shown when newest),
and a step 0 comes first: earlier attempts, oldest first: whole -> summary.

The plan goes late on purpose: it sits in the stable prompt prefix, and dropping it would cost
the KV prefix cache its hit on retries. If even goal + newest artifact (with everything else
dropped) exceed the budget, :class:`~swapos.capsule.schema.CapsuleBudgetError` is raised: the
newest artifact is never truncated, because a model asked to fix a half-shown file rewrites the
wrong thing. Its size is bounded by the code phase's ``max_tokens``, so a profile with enough
``n_ctx`` never hits the error. The result depends only on the inputs (deterministic).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Final

import msgspec

from swapos.capsule.schema import Artifact, Capsule, CapsuleBudgetError, Feedback

CountTokens = Callable[[str], int]

MAX_LINES: Final = 12
MAX_LINE_CHARS: Final = 160
_KEY_LINE: Final = re.compile(r"^(E\s|>\s|FAILED\b|ERROR\b)|(Error|Exception|assert)\b")


class AttemptView(msgspec.Struct, frozen=True, kw_only=True):
    """An earlier attempt shown whole: its artifact, outcome and feedback (full)."""

    artifact: Artifact
    status: str
    feedback: tuple[Feedback, ...] = ()


class CapsuleView(msgspec.Struct, frozen=True, kw_only=True):
    """What a prompt shows of a capsule after compression.

    Attributes:
        goal: the capsule's goal, whole.
        constraints: the constraints kept (all or none).
        plan_steps: the plan kept (all or none).
        earlier: one line per earlier attempt kept, oldest first.
        omitted_attempts: earlier attempt numbers dropped entirely, ascending.
        whole: earlier attempts shown whole (``whole_history`` only), oldest first; they
            are newer than those in ``earlier``.
        newest: the newest artifact, whole (``None`` before the first attempt).
        newest_status: its outcome, e.g. ``"failed (3/5 tests passed)"`` ("" if none).
        feedback: the newest attempt's feedback, possibly shortened, oldest first.
        dropped: what compression did, in order (for logs), e.g. ``"plan"``.
    """

    goal: str
    constraints: tuple[str, ...] = ()
    plan_steps: tuple[str, ...] = ()
    earlier: tuple[str, ...] = ()
    omitted_attempts: tuple[int, ...] = ()
    whole: tuple[AttemptView, ...] = ()
    newest: Artifact | None = None
    newest_status: str = ""
    feedback: tuple[Feedback, ...] = ()
    dropped: tuple[str, ...] = ()


Layout = Callable[[CapsuleView], str]


class _Levels(msgspec.Struct, kw_only=True):
    """Mutable compression state: how much of each part is still shown."""

    earlier: dict[int, int]  # attempt -> 3 whole, 2 summary, 1 status only, 0 dropped
    feedback: int = 3  # 3 full, 2 shortened, 1 one line, 0 dropped
    plan: bool = True
    constraints: bool = True
    dropped: list[str] = msgspec.field(default_factory=list)


def compress(
    capsule: Capsule,
    *,
    count_tokens: CountTokens,
    budget_tokens: int,
    layout: Layout,
    whole_history: bool = False,
) -> CapsuleView:
    """Choose what of ``capsule`` to show so that ``layout(view)`` fits ``budget_tokens``.

    Args:
        capsule: the capsule to show.
        count_tokens: the tokenizer of the model that will read the prompt.
        budget_tokens: the most tokens ``layout(view)`` may take.
        layout: renders a view into the full text that is measured.
        whole_history: start earlier attempts (those with an artifact) whole.

    Raises:
        CapsuleBudgetError: the layout does not fit even with everything optional dropped.
    """
    newest = capsule.newest_artifact
    current = newest.attempt if newest is not None else capsule.attempts
    older = sorted({a.attempt for a in capsule.artifacts} | {f.attempt for f in capsule.feedback})
    with_code = {a.attempt for a in capsule.artifacts}
    levels = _Levels(
        earlier={a: 3 if whole_history and a in with_code else 2 for a in older if a < current}
    )
    view = _view(capsule, levels, newest, current)
    used = count_tokens(layout(view))
    has_feedback = any(f.attempt >= current for f in capsule.feedback)
    steps = _steps(levels, capsule, has_feedback=has_feedback)
    while used > budget_tokens:
        step = next(steps, None)
        if step is None:
            raise CapsuleBudgetError(
                f"the prompt needs {used} tokens with everything optional dropped "
                f"(goal, starter code and newest attempt are kept whole), but the budget is "
                f"{budget_tokens}; raise the model's n_ctx or lower this phase's max_tokens"
            )
        levels.dropped.append(step)
        view = _view(capsule, levels, newest, current)
        used = count_tokens(layout(view))
    return view


def _steps(levels: _Levels, capsule: Capsule, *, has_feedback: bool) -> Iterator[str]:
    """Degrade ``levels`` one step per iteration, in the documented order (no-ops skipped).

    Yields what each step did (for :attr:`CapsuleView.dropped`).
    """
    for attempt, level in levels.earlier.items():
        if level == 3:
            levels.earlier[attempt] = 2
            yield f"attempt {attempt} whole"
    for attempt in levels.earlier:
        levels.earlier[attempt] = 1
        yield f"attempt {attempt} details"
    if has_feedback:
        levels.feedback = 2
        yield "feedback shortened"
    for attempt in levels.earlier:
        levels.earlier[attempt] = 0
        yield f"attempt {attempt}"
    if capsule.plan_steps:
        levels.plan = False
        yield "plan"
    if has_feedback:
        levels.feedback = 1
        yield "feedback to one line"
    if capsule.constraints:
        levels.constraints = False
        yield "constraints"
    if has_feedback:
        levels.feedback = 0
        yield "feedback"


def _view(capsule: Capsule, levels: _Levels, newest: Artifact | None, current: int) -> CapsuleView:
    earlier = tuple(
        _attempt_line(capsule, attempt, with_feedback=level == 2)
        for attempt, level in levels.earlier.items()
        if 0 < level < 3
    )
    whole = tuple(
        _attempt_view(capsule, attempt) for attempt, level in levels.earlier.items() if level == 3
    )
    omitted = tuple(attempt for attempt, level in levels.earlier.items() if level == 0)
    current_feedback = [f for f in capsule.feedback if f.attempt >= current]
    feedback = tuple(
        _shorten_feedback(f, levels.feedback) for f in current_feedback if levels.feedback > 0
    )
    return CapsuleView(
        goal=capsule.goal,
        constraints=capsule.constraints if levels.constraints else (),
        plan_steps=capsule.plan_steps if levels.plan else (),
        earlier=earlier,
        omitted_attempts=omitted,
        whole=whole,
        newest=newest,
        newest_status=status_text(newest, current_feedback) if newest is not None else "",
        feedback=feedback,
        dropped=tuple(levels.dropped),
    )


def _attempt_view(capsule: Capsule, attempt: int) -> AttemptView:
    artifact = [a for a in capsule.artifacts if a.attempt == attempt][-1]
    feedback = tuple(f for f in capsule.feedback if f.attempt == attempt)
    return AttemptView(artifact=artifact, status=status_text(artifact, feedback), feedback=feedback)


def _attempt_line(capsule: Capsule, attempt: int, *, with_feedback: bool) -> str:
    """``"attempt 2: failed (3/5 tests passed); critic: off by one"``."""
    artifacts = [a for a in capsule.artifacts if a.attempt == attempt]
    feedback = [f for f in capsule.feedback if f.attempt == attempt]
    line = f"attempt {attempt}: {status_text(artifacts[-1] if artifacts else None, feedback)}"
    if with_feedback and feedback:
        chosen = next((f for f in reversed(feedback) if f.source == "critic"), feedback[-1])
        line += f"; {chosen.source}: {key_line(chosen.text)}"
    return cap_line(line)


def status_text(artifact: Artifact | None, feedback: Sequence[Feedback]) -> str:
    """Describe an attempt's outcome, e.g. ``"failed (3/5 tests passed)"``."""
    if artifact is not None and not artifact.code.strip():
        word = "no code"
    elif artifact is None or artifact.passed is None:
        word = "not graded"
    else:
        word = "passed" if artifact.passed else "failed"
    counted = [f for f in feedback if f.tests_total is not None and f.tests_passed is not None]
    if counted:
        last = counted[-1]
        word += f" ({last.tests_passed}/{last.tests_total} tests passed)"
    return word


def _shorten_feedback(feedback: Feedback, level: int) -> Feedback:
    if level >= 3:
        return feedback
    text = shorten(feedback.text) if level == 2 else key_line(feedback.text)
    return msgspec.structs.replace(feedback, text=text)


def cap_line(line: str, limit: int = MAX_LINE_CHARS) -> str:
    """Cut ``line`` to ``limit`` characters, marking the cut with ``...``."""
    line = line.rstrip()
    return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."


def key_line(text: str) -> str:
    """The most informative line of ``text`` (an error line if any), capped."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "(empty)"
    for line in lines:
        if line.startswith("E "):
            return cap_line(line[1:].strip())
    chosen = next((line for line in lines if _KEY_LINE.search(line)), lines[0])
    return cap_line(chosen)


def shorten(text: str, max_lines: int = MAX_LINES) -> str:
    """Shorten ``text`` to ``max_lines`` capped lines (plus cut markers), preferring errors.

    Short texts come back unchanged except for capped line lengths. Long ones keep their key
    lines (pytest ``E``/``>`` lines, ``FAILED``, errors) and the last line (the pytest
    summary), or the head and tail when no line stands out; cuts are marked.
    """
    lines = [cap_line(line) for line in text.strip().splitlines()]
    if len(lines) <= max_lines:
        return "\n".join(lines)
    keys = [i for i, line in enumerate(lines) if _KEY_LINE.search(line)]
    if keys:
        kept = sorted({*keys[: max_lines - 2], len(lines) - 1})
    else:
        head = (max_lines - 1) // 2
        kept = [*range(head), *range(len(lines) - (max_lines - 1 - head), len(lines))]
    out: list[str] = []
    previous = -1
    for index in kept:
        if index > previous + 1:
            out.append(f"... ({index - previous - 1} lines cut)")
        out.append(lines[index])
        previous = index
    return "\n".join(out)
