"""What a fixer's prompt shows beyond its conversation, read from the capsule: the best
candidate it starts from (the retry policy's *Best candidate* rule). Both prompt layouts
(:mod:`~swapos.pipeline.prompts`, :mod:`~swapos.pipeline.chat_prompts`) render it; which
attempt a fixer starts from is the retry policy's."""

from __future__ import annotations

import msgspec

from swapos.capsule.schema import Capsule, Feedback


class Base(msgspec.Struct, frozen=True, kw_only=True):
    """The best candidate a fixer starts from, and the newer, worse one."""

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
