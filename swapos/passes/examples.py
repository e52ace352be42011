"""The ``examples`` pass: a task's examples, read from its docstring or brief, checked against
each candidate before its grade.

A :class:`~swapos.pipeline.hooks.BriefReader`: HumanEval-style docstring examples and the
forms a repository task's markdown brief states them in (:mod:`~swapos.passes.selfcheck`,
:mod:`~swapos.passes.brief_examples`, :mod:`~swapos.passes.brief_scenarios`,
:mod:`~swapos.passes.example_values`); its :class:`~swapos.pipeline.hooks.ExampleCheck` runs
them against a candidate in the sandbox (the retry policy says when: its *Pre-grade checks*,
*Draws* and *Sent back* rules), tells the coder which failed, and stops obeying an example
the candidates' own evidence shows to be wrong (:func:`~swapos.passes.selfcheck.distrusted`,
with a decision). Without it the policy checks no examples: a candidate is graded unless the
starter comes back unchanged or a pre-grade check holds it.

Fixtures: ``tests/test_selfcheck.py``, ``tests/test_brief_examples.py``,
``tests/test_example_values.py``; end to end ``tests/test_conductor.py`` (a failed self-check
goes back without a grade; a wrong example is distrusted) and ``tests/test_draws_conductor.py``.

Measured: reruns of the HumanEval problems whose examples it newly read, spliced on a full run
(docs/results/log/2026-12-01-humaneval.md; docs/results/opinion-examples-2026-12-01,
``humaneval18-examples``: 6 -> 12 of 18 passed, none lost), and on builtin
(docs/results/log/2026-12-01-builtin37.md, ``builtin6-opinion``: 31/37 with the brief's
examples, a task newly passed by a draw its example chose). Not a held-out figure: the forms
it reads were chosen on these problems, and the draws it enables (docs/draws.md) are what
most of the rescues are.
"""

from __future__ import annotations

from swapos.data.task import Task
from swapos.grader import GradeResult
from swapos.passes.selfcheck import (
    CandidateCheck,
    Example,
    distrusted,
    example_outcomes,
    selfcheck_task,
    task_examples,
)
from swapos.pipeline.hooks import Brief, Judged
from swapos.pipeline.identity import candidate_identity
from swapos.pipeline.steps import feedback_text
from swapos.policies.retry_steps import Checked


class ExamplesReader:
    """Reads a task's examples (none: the brief is left as it is)."""

    def read(self, task: Task, brief: Brief) -> Brief:
        examples = task_examples(task)
        if not examples:
            return brief
        return Brief(examples=TaskExamples(task, examples), opening=brief.opening)


class TaskExamples:
    """One task's examples, checked against its candidates; remembers each distinct
    candidate's outcome per example, which :func:`distrusted` reads."""

    def __init__(self, task: Task, examples: list[Example]) -> None:
        self._task = task
        self._examples = examples
        self._checks: dict[str, CandidateCheck] = {}  # by candidate identity

    @property
    def count(self) -> int:
        return len(self._examples)

    @property
    def where(self) -> str:
        return "docstring" if self._task.category == "completion" else "brief"

    def suite(self) -> Task:
        return selfcheck_task(self._task, self._examples)

    def judge(self, result: GradeResult, code: str, model: str) -> Judged:
        """The verdict, with the failed examples for the coder; a candidate that fails only
        distrusted examples passes (the decision is recorded); the tests still grade it."""
        failed = self._remember(code, model, result)
        if failed and failed <= (wrong := distrusted(list(self._checks.values()))):
            total = result.tests_total
            passed = Checked(passed=True, tests_passed=total, tests_total=total)
            return Judged(passed, self._distrust_text(sorted(wrong)))
        check = Checked(
            passed=result.passed, tests_passed=result.tests_passed,
            tests_total=result.tests_total, text=selfcheck_text(result),
        )  # fmt: skip
        return Judged(check)

    def _remember(self, code: str, model: str, result: GradeResult) -> set[int]:
        """Keep this candidate's per-example outcome (once per distinct source); the
        examples it failed (empty when the check says nothing)."""
        passed, failed = example_outcomes(result, self._examples)
        if passed or failed:
            key = candidate_identity(code)
            self._checks.setdefault(key, CandidateCheck(model=model, passed=passed, failed=failed))
        return set(failed)

    def _distrust_text(self, wrong: list[int]) -> str:
        """The decision's words: which examples are set aside, and why."""
        examples = self._examples
        calls = "; ".join(f"{examples[i].call} == {examples[i].stated()}" for i in wrong)
        return (
            f"distrusted: {calls} (every checked candidate of every model returns the same "
            "other value): not obeyed; the tests grade"
        )


def selfcheck_text(result: GradeResult) -> str:
    """The failed examples, one line each (``f(2) returned 3; the docstring says 4``): the
    self-check's own test code is not the model's business."""
    failed = [
        line.split("AssertionError:", 1)[1].strip()
        for line in result.output_tail.splitlines()
        if line.startswith("E ") and "AssertionError:" in line
    ]
    return "\n".join(dict.fromkeys(failed)) or feedback_text(result)
