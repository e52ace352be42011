"""The sandboxed grader: run a task's pytest tests against an untrusted candidate.

Usable alone (``from swapos.grader import grade``; ``grade(task, code)``): it imports only the
bottom floor (:mod:`swapos.data`, :mod:`swapos.tempdirs`), never the pipeline. Its threat
model and what stays open are in docs/grader.md.
"""

from __future__ import annotations

from swapos.grader.grading import GradeResult as GradeResult
from swapos.grader.grading import SandboxLimits as SandboxLimits
from swapos.grader.grading import count_tests as count_tests
from swapos.grader.grading import grade as grade
from swapos.grader.verdict import Outcome as Outcome

__all__ = ["GradeResult", "Outcome", "SandboxLimits", "count_tests", "grade"]
