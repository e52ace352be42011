"""What a fixer's prompt shows beyond its conversation, read from the capsule: the best
candidate it starts from (retry rule 10) and a focus prompt's failing example (rule 11).
Both prompt layouts (:mod:`~swapos.pipeline.prompts`, :mod:`~swapos.pipeline.chat_prompts`)
render these; which prompt is asked for is the retry policy's."""

from __future__ import annotations

import msgspec

from swapos.capsule.schema import Capsule, Feedback
from swapos.pipeline.failures import exercised_lines, first_failure


class Base(msgspec.Struct, frozen=True, kw_only=True):
    """The best candidate a fixer starts from, and the newer, worse one (rule 10)."""

    attempt: int
    code: str
    status: str  # "7/8 tests passed"
    newest: int
    newest_status: str

    def note(self) -> str:
        """What the fixer is told, above the best candidate's code."""
        return (
            f"Attempt {self.newest} passes fewer tests than attempt {self.attempt} "
            f"({self.newest_status}; attempt {self.attempt}: {self.status}). Start again "
            f"from attempt {self.attempt}'s code and fix it:"
        )


def base_of(capsule: Capsule, attempt: int) -> Base | None:
    """Attempt ``attempt``'s candidate as the one to fix (None: 0, or nothing to show)."""
    if attempt <= 0:
        return None
    code = [a.code for a in capsule.artifacts if a.attempt == attempt]
    graded = [f for f in capsule.feedback if f.source == "grader" and f.tests_total is not None]
    ours = [f for f in graded if f.attempt == attempt]
    later = [f for f in graded if f.attempt > attempt]
    if not code or not ours or not later:
        return None
    return Base(
        attempt=attempt, code=code[-1], status=_status(ours[-1]), newest=later[-1].attempt,
        newest_status=_status(later[-1]),
    )  # fmt: skip


def _status(f: Feedback) -> str:
    return f"{f.tests_passed}/{f.tests_total} tests passed"


class Focus(msgspec.Struct, frozen=True, kw_only=True):
    """A focus prompt's matter (rule 11): the failing example as one line, the lines of the
    candidate its test ran (numbered; "" when the output shows none, or when they are the
    whole candidate and no traceback line marks them) and that candidate."""

    headline: str
    lines: str
    code: str


def focus_of(capsule: Capsule, starter: str, base: int = 0) -> Focus:
    """The failing example a focus prompt leads with: from the grade of attempt ``base``
    (0: the newest grade whose output names a failing test, else the newest grade, else
    the newest failed check), with the candidate that grade ran (else the newest candidate,
    else ``starter``)."""
    chosen = _chosen(capsule, base)
    code = _code(capsule, chosen.attempt if chosen else 0) or _newest(capsule) or starter
    if chosen is None:
        return Focus(headline="", lines="", code=code)
    failure = first_failure(chosen.text)
    if failure is None:
        return Focus(headline="", lines="", code=code)
    lines = exercised_lines(code, failure)
    if not failure.frames and len(lines.splitlines()) >= len(code.strip().splitlines()):
        lines = ""  # the whole candidate, unmarked: it is shown whole below anyway
    return Focus(headline=failure.headline, lines=lines, code=code)


def _chosen(capsule: Capsule, base: int) -> Feedback | None:
    grades = [f for f in capsule.feedback if f.source == "grader"]
    if base:
        grades = [f for f in grades if f.attempt == base] or grades
    failing = [f for f in grades if (x := first_failure(f.text)) is not None and x.test]
    checks = [f for f in capsule.feedback if f.source == "selfcheck"]
    for found in (failing, grades, checks):
        if found:
            return found[-1]
    return None


def _code(capsule: Capsule, attempt: int) -> str:
    code = [a.code for a in capsule.artifacts if a.attempt == attempt and a.code.strip()]
    return code[-1] if code else ""


def _newest(capsule: Capsule) -> str:
    newest = capsule.newest_artifact
    return newest.code if newest is not None and newest.code.strip() else ""
