"""The context capsule: the structured state handed from phase to phase (docs/architecture.md).

A :class:`Capsule` is plain, frozen data. It is versioned (:data:`CAPSULE_VERSION`) and
round-trips through JSON byte for byte: ``encode_capsule(decode_capsule(b)) == b`` for every
``b`` that :func:`encode_capsule` produced. Sequences are tuples so a capsule is immutable and
hashable; the ``with_*`` helpers return a new capsule with one more entry.

Schema evolution: a change to any Struct below bumps :data:`CAPSULE_VERSION`; a reader refuses a
capsule from a newer version (:class:`CapsuleVersionError`) instead of silently dropping fields.

This module is on the bottom floor: it imports only the standard library and msgspec.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

import msgspec

from swapos.errors import CapsuleError as CapsuleError  # noqa: PLC0414 (re-exported)

CAPSULE_VERSION: Final = 2

FeedbackSource = Literal["grader", "critic", "selfcheck"]


class CapsuleVersionError(CapsuleError):
    """A capsule was written by a newer SwapOS than the one reading it."""


class CapsuleBudgetError(CapsuleError):
    """The parts of a prompt that are never compressed do not fit in the token budget."""


class CapsuleMeta(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which task the capsule belongs to.

    Attributes:
        task_id: the task's id.
        category: ``bugfix``, ``feature``, ``refactor`` or ``completion`` (a plain string so
            this floor does not depend on the task format).
        difficulty: the task's difficulty (1 = easiest).
    """

    task_id: str
    category: str
    difficulty: int = 2


class Artifact(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One code attempt.

    Attributes:
        attempt: 1-based attempt number.
        phase: the phase that produced it (normally ``"code"``).
        code: the full candidate ``solution.py`` (may be empty if nothing was extracted).
        passed: the grader's verdict; ``None`` until graded.
        answer: the answer as the model wrote it, when it differs from ``code`` (a chat
            model's fenced block for a function the candidate completes); chat prompts
            replay it as the model's turn, so a retry extends what the model wrote.
    """

    attempt: int
    phase: str
    code: str
    passed: bool | None = None
    answer: str = ""


class Feedback(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the grader or the critic said about one attempt.

    Attributes:
        attempt: the attempt this feedback is about.
        source: ``"grader"`` (test output), ``"critic"`` (what to fix) or ``"selfcheck"``
            (the docstring examples run before grading).
        text: the feedback itself.
        tests_passed: passing tests, when the grader counted them.
        tests_total: collected tests, when the grader counted them.
    """

    attempt: int
    source: FeedbackSource
    text: str
    tests_passed: int | None = None
    tests_total: int | None = None


class Decision(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A choice the pipeline made, e.g. ``"router skipped reason: difficulty 1"``."""

    phase: str
    text: str


class PhaseEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One phase that ran.

    Attributes:
        phase: ``reason``, ``code``, ``grade`` or ``critic``.
        model: the model that ran it (empty for the grader).
        attempt: the attempt it belongs to.
        outcome: a short word or phrase, e.g. ``"ok"``, ``"hit_cap"``, ``"failed: 2/5"``.
    """

    phase: str
    model: str
    attempt: int
    outcome: str


class Capsule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The structured state of one task in flight.

    Attributes:
        version: the schema version that wrote it (:data:`CAPSULE_VERSION`).
        meta: which task.
        goal: the brief; never compressed.
        constraints: rules the answer must follow.
        plan_steps: the reason phase's plan.
        artifacts: code attempts, oldest first.
        feedback: grader and critic feedback, oldest first.
        decisions: choices the pipeline made (for the record; not rendered into prompts).
        history: phases that ran, oldest first (for the record; not rendered into prompts).
    """

    version: int = CAPSULE_VERSION
    meta: CapsuleMeta
    goal: str
    constraints: tuple[str, ...] = ()
    plan_steps: tuple[str, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    feedback: tuple[Feedback, ...] = ()
    decisions: tuple[Decision, ...] = ()
    history: tuple[PhaseEntry, ...] = ()

    @property
    def newest_artifact(self) -> Artifact | None:
        """The most recently added artifact, or ``None``."""
        return self.artifacts[-1] if self.artifacts else None

    @property
    def attempts(self) -> int:
        """The highest attempt number seen in artifacts or feedback (0 if none)."""
        numbers = [a.attempt for a in self.artifacts] + [f.attempt for f in self.feedback]
        return max(numbers, default=0)


class _VersionProbe(msgspec.Struct):
    """Reads only the version of a capsule document (unknown fields ignored)."""

    version: int


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(Capsule)
_PROBE: Final = msgspec.json.Decoder(_VersionProbe)


def encode_capsule(capsule: Capsule) -> bytes:
    """Encode a capsule as compact JSON (fields in declaration order, deterministic)."""
    return _ENCODER.encode(capsule)


def decode_capsule(data: bytes | str) -> Capsule:
    """Decode a capsule written by :func:`encode_capsule`.

    Raises:
        CapsuleVersionError: the capsule comes from a newer schema version.
        CapsuleError: the data is not a valid capsule (the message names the bad field).
    """
    try:
        version = _PROBE.decode(data).version
    except msgspec.DecodeError as exc:
        raise CapsuleError(f"not a capsule document: {exc}") from exc
    if version > CAPSULE_VERSION:
        raise CapsuleVersionError(
            f"capsule schema version {version} is newer than this SwapOS understands "
            f"(version {CAPSULE_VERSION}); upgrade swapos to read it"
        )
    if version < 1:
        raise CapsuleError(f"capsule schema version {version} is invalid (must be >= 1)")
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise CapsuleError(f"invalid capsule: {exc}") from exc


def new_capsule(
    *,
    task_id: str,
    category: str,
    goal: str,
    difficulty: int = 2,
    constraints: Iterable[str] = (),
) -> Capsule:
    """Start the capsule of a task (no plan, no attempts yet)."""
    meta = CapsuleMeta(task_id=task_id, category=category, difficulty=difficulty)
    return Capsule(meta=meta, goal=goal, constraints=tuple(constraints))


def with_plan(capsule: Capsule, steps: Iterable[str]) -> Capsule:
    """Return ``capsule`` with its plan replaced by ``steps``."""
    return msgspec.structs.replace(capsule, plan_steps=tuple(steps))


def with_artifact(capsule: Capsule, artifact: Artifact) -> Capsule:
    """Return ``capsule`` with ``artifact`` appended."""
    return msgspec.structs.replace(capsule, artifacts=(*capsule.artifacts, artifact))


def with_newest_replaced(capsule: Capsule, artifact: Artifact) -> Capsule:
    """Return ``capsule`` with its newest artifact replaced by ``artifact`` (a candidate drawn
    in its place), or appended when there is none."""
    return msgspec.structs.replace(capsule, artifacts=(*capsule.artifacts[:-1], artifact))


def with_verdict(capsule: Capsule, *, attempt: int, passed: bool) -> Capsule:
    """Return ``capsule`` with the newest artifact of ``attempt`` marked passed or failed.

    Raises:
        CapsuleError: no artifact has that attempt number.
    """
    for index in range(len(capsule.artifacts) - 1, -1, -1):
        artifact = capsule.artifacts[index]
        if artifact.attempt == attempt:
            graded = msgspec.structs.replace(artifact, passed=passed)
            artifacts = (*capsule.artifacts[:index], graded, *capsule.artifacts[index + 1 :])
            return msgspec.structs.replace(capsule, artifacts=artifacts)
    raise CapsuleError(f"no artifact for attempt {attempt}; add it with with_artifact first")


def with_feedback(capsule: Capsule, feedback: Feedback) -> Capsule:
    """Return ``capsule`` with ``feedback`` appended."""
    return msgspec.structs.replace(capsule, feedback=(*capsule.feedback, feedback))


def with_decision(capsule: Capsule, decision: Decision) -> Capsule:
    """Return ``capsule`` with ``decision`` appended."""
    return msgspec.structs.replace(capsule, decisions=(*capsule.decisions, decision))


def with_history(capsule: Capsule, entry: PhaseEntry) -> Capsule:
    """Return ``capsule`` with ``entry`` appended to its phase history."""
    return msgspec.structs.replace(capsule, history=(*capsule.history, entry))
