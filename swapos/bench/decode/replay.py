"""Recorded outputs for ``bench decode``: what each phase read and wrote, from capsules.

A results folder keeps each task's final capsule (``<mode>/capsules/<task>.json``): the
brief, every code attempt as the model wrote it, the grader's and the critic's feedback.
Each attempt becomes a :class:`Recorded` case: the text the model read before writing it
(the brief, the constraints, the plan, the starter file when the task can be found, then
every earlier attempt and its feedback, in the order the pipeline's prompts show them) and
what it wrote. The context is rebuilt from the capsule, not the exact prompt (no template,
no compression): close enough to count which drafts a prompt lookup would find, since the
texts a draft comes from (the starter, earlier attempts) are in it whole.

Kinds: ``reason`` (the plan, from the brief and starter), ``code`` (first attempt), ``fix``
(a later attempt, which rewrites the file it was shown), ``critic`` (the critic's notes on
an attempt).
"""

from __future__ import annotations

import functools
from pathlib import Path

import msgspec

from swapos.capsule.schema import Capsule, decode_capsule
from swapos.errors import TaskError
from swapos.pipeline.tasks import builtin_suite_path

KINDS = ("reason", "code", "fix", "critic")


class Recorded(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded phase: what its model read (rebuilt) and what it wrote."""

    task_id: str
    kind: str
    attempt: int
    context: str
    output: str


def speed_pool(cases: list[Recorded], kind: str) -> list[Recorded]:
    """The cases of ``kind`` in the order ``bench decode`` times them: the longest recorded
    answers first (where drafting matters most), one per task before any task's second, so
    ``--speed-cases 3`` spreads over three tasks when there are three."""
    longest = sorted((c for c in cases if c.kind == kind), key=lambda c: -len(c.output))
    seen: set[str] = set()
    first: list[Recorded] = []
    rest: list[Recorded] = []
    for case in longest:
        (rest if case.task_id in seen else first).append(case)
        seen.add(case.task_id)
    return first + rest


def find_capsules(folders: list[Path]) -> list[Path]:
    """Every capsule under ``folders`` (any depth), sorted."""
    found: set[Path] = set()
    for folder in folders:
        if folder.is_file():
            found.add(folder)
        found.update(folder.rglob("capsules/*.json"))
    return sorted(found)


def recorded_phases(paths: list[Path]) -> list[Recorded]:
    """The :class:`Recorded` cases of every capsule in ``paths`` (unreadable ones skipped),
    each once: two arms of one run that wrote the same text for the same task (an arm whose
    lever never acted) record one case, not two."""
    out: dict[Recorded, None] = {}
    for path in paths:
        try:
            capsule = decode_capsule(path.read_bytes())
        except (OSError, ValueError):
            continue
        out.update(dict.fromkeys(_cases(capsule)))
    return list(out)


def _cases(capsule: Capsule) -> list[Recorded]:
    task_id = capsule.meta.task_id
    brief = [capsule.goal, *capsule.constraints]
    starter = _starter(task_id)
    if starter:
        brief.append(starter)
    cases: list[Recorded] = []
    if capsule.plan_steps:
        cases.append(
            Recorded(
                task_id=task_id,
                kind="reason",
                attempt=0,
                context="\n\n".join(brief),
                output="\n".join(capsule.plan_steps),
            )
        )
    shown = [*brief, *capsule.plan_steps]
    for art in sorted(capsule.artifacts, key=lambda a: a.attempt):
        written = art.answer or art.code
        if written.strip():
            kind = "code" if art.attempt == 1 else "fix"
            cases.append(
                Recorded(
                    task_id=task_id,
                    kind=kind,
                    attempt=art.attempt,
                    context="\n\n".join(shown),
                    output=written,
                )
            )
        shown.append(written)
        for fb in capsule.feedback:
            if fb.attempt != art.attempt:
                continue
            if fb.source == "critic" and fb.text.strip():
                cases.append(
                    Recorded(
                        task_id=task_id,
                        kind="critic",
                        attempt=art.attempt,
                        context="\n\n".join(shown),
                        output=fb.text,
                    )
                )
            shown.append(fb.text)
    return cases


@functools.cache
def _starters() -> dict[str, str]:
    """Starter files by task id: the builtin suite and, when installed, HumanEval."""
    found: dict[str, str] = {}
    for path in builtin_suite_path().glob("*/starter/solution.py"):
        found[path.parent.parent.name] = path.read_text(encoding="utf-8")
    try:
        from swapos.pipeline.humaneval import load_humaneval

        found.update({t.task_id: t.starter for t in load_humaneval()})
    except TaskError:  # an optional suite: without it, no starter
        pass
    return found


def _starter(task_id: str) -> str:
    return _starters().get(task_id, "")
