"""The ``open_asked`` pass: the first answer of a task whose brief asks to add a function or
class is opened with that definition, asked as an edit and spliced into the starter.

A :class:`~swapos.pipeline.hooks.BriefReader` and a
:class:`~swapos.pipeline.hooks.CandidateRepair`. Asked for "the complete solution.py", small
models mostly copy a feature task's starter back and stop, without the function its brief asks
for. For a bugfix or feature with a starter whose brief asks to add a definition the starter
lacks (:func:`~swapos.passes.brief_names.asked_names`, the rules in docs/tasks.md), it reads
that definition's first words (``def format_table``, ``class RingBuffer``: the name, so the
model writes the signature in its own tokens): the core then asks the first request for an
edit and opens the coder's answer with them, and the profile's ``open`` role, when set, writes
that answer (:func:`swapos.pipeline.routing.opened_by`). Its repair splices an answer to an
edit request back into the file the prompt showed (:mod:`~swapos.passes.edits`); its draws
reuse the opened prompt; retries are asked as before.

Fixtures: ``tests/test_brief_names.py``, ``tests/test_edits.py``; end to end
``tests/test_conductor_rules.py`` (the opened first answer spliced into the starter; the open
role writes it; only the first request is opened).

Measured: side by side against the whole-file request on 17 feature tasks in four interleaved
runs, the held-out halves first (docs/results/log/2026-12-06-open-asked.md; the runs
docs/results/issues4odd-open-2026-12-06,
builtin5odd-open-2026-12-06, builtin5even-open-2026-12-06, issues3even-open-2026-12-06): the
same 9 passed (one gained, one lost), no answer was the starter again (13 in the other arm),
and the ``issues`` feature tasks cost x0.46 and x0.38 the wall; with it on, all of builtin
passed 32/37 (docs/results/builtin37-open-2026-12-06), as before.
"""

from __future__ import annotations

from swapos.data.task import Task
from swapos.passes.brief_names import asked_names
from swapos.passes.edits import edits_apply, merge_edit
from swapos.pipeline.hooks import Brief, Repaired


class OpenAsked:
    """Reads the opening of a first answer; splices an edit answer into its file."""

    def read(self, task: Task, brief: Brief) -> Brief:
        if not edits_apply(task):
            return brief
        heads = (definition_head(name) for name in asked_names(task.problem, task.starter))
        opening = next((head for head in heads if head), "")
        return Brief(examples=brief.examples, opening=opening) if opening else brief

    def repair(self, task: Task, code: str, *, edit_of: str | None) -> Repaired:
        """``code`` put into the file an edit prompt showed; as it is when the prompt asked
        for the whole file, or when either does not parse."""
        if edit_of is None:
            return Repaired(code)
        merged = merge_edit(edit_of, code)
        return Repaired(code if merged is None else merged)


def definition_head(name: str) -> str:
    """``class Name`` for a CapWords name, ``def name`` for a lower-case one; "" for a
    constant (``TAX_RATE``: its value is the answer, not its name)."""
    if name.isupper():
        return ""
    return f"class {name}" if name[:1].isupper() else f"def {name}"
