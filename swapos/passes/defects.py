"""The ``precheck_defects`` pass: what is wrong with a candidate that needs no run to see
(:class:`PrecheckDefects`, a :class:`~swapos.pipeline.hooks.PreGradeCheck`).

A candidate that does not parse fails every test; so does a repository task's candidate that
does not define a name its brief asks to add (:func:`swapos.passes.brief_names.asked_names`):
the tests import it. Neither needs the sandbox to know, and with no example to check such a
candidate (or a draw) would be graded and spend the grade. :func:`candidate_defect` says what
is wrong in words the coder reads next; the retry policy treats a defect like a failed check
(its *Pre-grade checks*, *Draws* and *Sent back* rules), and grades such a candidate only where
it grades every candidate unchecked (the last attempt, a spent check budget).

Fixtures: ``tests/test_defects.py``, ``tests/test_brief_names.py``; end to end
``tests/test_conductor_rules.py`` (a candidate without the asked class draws instead of
spending a grade).

Measured offline only, no run side by side (docs/results/log/2026-12-06-precheck-defects.md):
on the 530 distinct candidates recorded in the day's seven run folders
(docs/results/humaneval164-default-2026-12-06, builtin37-draft-2026-12-06,
builtin13-edit-2026-12-06, issues4even-default-2026-12-06, issues11-edit-2026-12-06,
issues11-focus-2026-12-06, issues3-redraw-2026-12-06), 44 would be held, none of which passed;
what the draws do instead of the grades it saves is measured only by a run.
"""

from __future__ import annotations

import ast
from typing import Final

from swapos.data.task import Task
from swapos.passes.brief_names import asked_names
from swapos.pipeline.bindings import names_bound
from swapos.pipeline.extract import PARSE_ERRORS


def candidate_defect(code: str, task: Task) -> str:
    """Why ``code`` cannot pass ``task``'s tests, seen without running it; "" when nothing is
    seen (an empty candidate has its own verdict)."""
    if not code.strip():
        return ""
    try:
        tree = ast.parse(code)
    except PARSE_ERRORS as e:
        where = f" (line {e.lineno})" if isinstance(e, SyntaxError) and e.lineno else ""
        first = str(e.msg if isinstance(e, SyntaxError) else e).splitlines()[0]
        return f"the candidate is not valid Python: {type(e).__name__}: {first}{where}"
    if task.category == "completion" or not task.problem.strip():
        return ""
    bound = _module_names(tree)
    missing = [n for n in asked_names(task.problem, task.starter) if n not in bound]
    if not missing:
        return ""
    listed = ", ".join(f"`{n}`" for n in missing)
    them = "them" if len(missing) > 1 else "it"
    return (
        f"the candidate does not define {listed} at module level, which the task asks to add; "
        f"the tests import {them} from solution.py"
    )


_BLOCKS: Final = ("body", "orelse", "finalbody")


def _module_names(tree: ast.Module) -> set[str]:
    """The names ``tree`` binds at module level: in its top-level statements and in the
    blocks of its ``if``, ``try``, ``with`` and loops, not in function or class bodies."""
    names: set[str] = set()
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(stmt.name)
            continue
        for block in _BLOCKS:
            todo.extend(getattr(stmt, block, ()))
        for handler in getattr(stmt, "handlers", ()):
            todo.extend(handler.body)
        heads = [v for f, v in ast.iter_fields(stmt) if f not in {*_BLOCKS, "handlers"}]
        for part in (p for v in heads for p in (v if isinstance(v, list) else [v])):
            if isinstance(part, ast.AST):
                names |= names_bound(part)
    return names


class PrecheckDefects:
    """The pass: :func:`candidate_defect`."""

    def defect(self, task: Task, code: str) -> str:
        return candidate_defect(code, task)
