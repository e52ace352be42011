"""What a pass may add to the conducting core, and the passes a task runs with.

The core (the conductor, its steps and prompts, the extraction of code from an answer, the
grade, the retry policy) runs a task with no pass at all. A *pass* is a heuristic over a
task's brief or a model's answer that a profile names (``pipeline.passes``; the passes
themselves are :mod:`swapos.passes`, a floor above: they import the core, never the
reverse). A pass adds to the core through three small interfaces:

- a :class:`BriefReader` reads something of the brief before the first prompt: the
  task's examples, checked against each candidate before its grade (:class:`ExampleCheck`),
  or the opening of the first answer (a definition the brief asks to add);
- a :class:`CandidateRepair` changes a code answer before anything else reads it (and says
  so: a decision);
- a :class:`PreGradeCheck` says what is wrong with a candidate without running it (the
  retry policy holds such a candidate before its grade).

:class:`Passes` is the set a task runs with, in the order the core applies them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from swapos.data.task import Task
from swapos.grader import GradeResult
from swapos.policies.retry_steps import Checked


class Judged(NamedTuple):
    """An example check's verdict on one candidate, and what the core records of it ("":
    nothing)."""

    check: Checked
    said: str = ""


class ExampleCheck(Protocol):
    """A task's examples, as a pass read them, run before a candidate's grade. Made for one
    task; it may remember the candidates it judged."""

    @property
    def count(self) -> int:
        """How many examples."""
        ...

    @property
    def where(self) -> str:
        """Where they were read (``docstring``, ``brief``)."""
        ...

    def suite(self) -> Task:
        """The examples as a task whose tests the sandbox runs against a candidate."""
        ...

    def judge(self, result: GradeResult, code: str, model: str) -> Judged:
        """The check of ``code`` (written by ``model``) from the sandbox's ``result``."""
        ...


@dataclass(frozen=True)
class Brief:
    """What the passes read of a task's brief: its examples (None: none to check) and the
    first words of the definition a repository task's first answer opens with ("")."""

    examples: ExampleCheck | None = None
    opening: str = ""


class BriefReader(Protocol):
    """Reads something of a task's brief for the core."""

    def read(self, task: Task, brief: Brief) -> Brief:
        """``brief`` with what this reader reads of ``task``."""
        ...


class Repaired(NamedTuple):
    """A repaired answer's code, and the decision that says what changed ("": nothing
    said)."""

    code: str
    said: str = ""


class CandidateRepair(Protocol):
    """Changes a (non-empty) code answer before anything reads it."""

    def repair(self, task: Task, code: str, *, edit_of: str | None) -> Repaired:
        """``code`` repaired; ``edit_of`` is the file the prompt asked an edit of (None: it
        asked for the whole file)."""
        ...


class PreGradeCheck(Protocol):
    """Sees what is wrong with a candidate without running it."""

    def defect(self, task: Task, code: str) -> str:
        """What is wrong with ``code`` (non-empty), in words the coder reads; "": nothing."""
        ...


@dataclass(frozen=True)
class Passes:
    """The passes a task runs with (``names``), by interface, each in the order applied."""

    names: tuple[str, ...] = ()
    readers: tuple[BriefReader, ...] = ()
    repairs: tuple[CandidateRepair, ...] = ()
    checks: tuple[PreGradeCheck, ...] = ()

    def brief(self, task: Task) -> Brief:
        """What the readers read of ``task``'s brief, in turn."""
        brief = Brief()
        for reader in self.readers:
            brief = reader.read(task, brief)
        return brief

    def repaired(self, task: Task, code: str, *, edit_of: str | None) -> tuple[str, list[str]]:
        """``code`` through every repair, in turn, and what they said."""
        said: list[str] = []
        for repair in self.repairs:
            code, text = repair.repair(task, code, edit_of=edit_of)
            said += [text] if text else []
        return code, said

    def defect(self, task: Task, code: str) -> str:
        """The first defect a check sees in ``code`` ("": none)."""
        return next((d for check in self.checks if (d := check.defect(task, code))), "")


def combined(parts: Sequence[Passes]) -> Passes:
    """``parts`` as one set, each interface's passes in the order of ``parts``."""
    return Passes(
        names=tuple(n for p in parts for n in p.names),
        readers=tuple(r for p in parts for r in p.readers),
        repairs=tuple(r for p in parts for r in p.repairs),
        checks=tuple(c for p in parts for c in p.checks),
    )


NO_PASSES = Passes()
"""The core alone."""
