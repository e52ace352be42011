"""The ``restore_dropped`` pass: put back what a candidate dropped and still uses, a repair
with no model in it (:class:`RestoreDropped`, a :class:`~swapos.pipeline.hooks.CandidateRepair`,
with a decision naming what it put back).

A model that rewrites a whole ``solution.py`` often leaves out a line it did not mean to
change, and the code it kept still names it: ``_MISSING = object()``, ``COMMENT_PREFIXES =
("#", ";")``, ``import time``, ``from dataclasses import dataclass``. Such a candidate fails
every test with a ``NameError``, and the fixer, shown the traceback, often writes the same
file again. :func:`restore_dropped` finds the names a candidate reads and binds nowhere
(:mod:`symtable`'s view of its scopes, builtins aside) and puts back, for each:

1. the starter's own module-level binding of it: its import (that one name of it), its
   assignment, its function or class, as the starter writes it;
2. else, for a name the starter does not bind, a standard import where the name says which
   without doubt: a standard-library module read only as ``name.attribute`` (``re.sub``:
   ``import re``), or a name of :data:`WELL_KNOWN` (``dataclass``: ``from dataclasses import
   dataclass``).

3. (a bugfix or feature task) a public function or class of the starter (its name does not
   start with ``_``) that the candidate does not define at all, as the starter writes it: the
   tests import the starter's names, and a model that rewrote only what it changed left the
   rest out (``cannot import name 'latest'``). Not for a refactor, which may remove what it
   restructures.

4. with any statement of the starter put back (rules 1 and 3), or when the candidate
   defines a function or class the starter defines (it rewrote the starter's file), the
   starter's ``from __future__`` imports that the candidate lacks, first in the file (after
   its docstring): the starter's code was written under them (a class of the starter whose
   method annotates ``other: Interval`` does not load without ``from __future__ import
   annotations``, whether the model kept it or it was put back).

Nothing else: a name bound nowhere that neither rule covers (a helper the model invented
and never wrote) stays, and the check or the tests say so; a candidate with a ``from m
import *`` is left as it is (what that binds is not known here). What is put back may name more
dropped things (``_PATTERN = re.compile(...)`` needs ``re``): the rules run again, a few
times at most. An import goes after the candidate's last top-level import; anything else
right after the last top-level statement binding a name it needs at import time, and before
the first one that needs it then (a default argument, a decorator, a base class, module-level
code); where no such place exists, it is not put back. The candidate is otherwise untouched.

Fixtures: ``tests/test_restore.py``; end to end ``tests/test_conductor_rules.py`` (a dropped
constant and the starter's functions put back before the grade; not for a refactor).

Measured offline only, no run side by side (docs/results/log/2026-12-06-restore-dropped.md
and 2026-12-06-precheck-defects.md): replayed on the recorded
candidates of the runs docs/results/issues11-edit-2026-12-06, issues11-focus-2026-12-06,
issues3-redraw-2026-12-06 and builtin13-edit-2026-12-06, 9 candidates changed, 7 passed more
tests, 1 all of them, none fewer; on the day's seven run folders (530 candidates), 16 changed,
feature_slugify's attempt 1 0/6 -> 6/6 and semver-prerelease's 0/15 -> 9/15 and 12/15.
"""

from __future__ import annotations

import ast
import builtins
import symtable
import sys
from collections.abc import Iterator
from typing import Final

from swapos.data.task import Task
from swapos.passes.edits import EDIT_CATEGORIES
from swapos.pipeline.bindings import DEFINITIONS, definitions
from swapos.pipeline.extract import PARSE_ERRORS
from swapos.pipeline.hooks import Repaired

MAX_ROUNDS: Final = 4
_BUILTINS: Final = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__"}
_STDLIB: Final = frozenset(sys.stdlib_module_names)

WELL_KNOWN: Final[dict[str, str]] = {
    **dict.fromkeys(("dataclass", "field", "asdict", "astuple", "fields"), "dataclasses"),
    **dict.fromkeys(
        (
            "Any", "Callable", "ClassVar", "Dict", "Final", "FrozenSet", "Generic", "Iterable",
            "Iterator", "List", "Literal", "Mapping", "NamedTuple", "Optional", "Protocol",
            "Sequence", "Set", "Tuple", "Type", "TypeVar", "Union", "cast", "overload",
        ),
        "typing",
    ),
    **dict.fromkeys(
        ("defaultdict", "Counter", "OrderedDict", "deque", "namedtuple"), "collections"
    ),
    **dict.fromkeys(("lru_cache", "partial", "reduce", "total_ordering", "wraps"), "functools"),
    "Enum": "enum",
    "Path": "pathlib",
    "Decimal": "decimal",
    "Fraction": "fractions",
    "ABC": "abc",
    "abstractmethod": "abc",
}  # fmt: skip
"""Names that say their standard module without doubt, when a candidate uses one unbound."""


def restore_dropped(code: str, starter: str, *, exported: bool = False) -> tuple[str, list[str]]:
    """``code`` with what it reads and binds nowhere put back by the module's rules, and the
    statements put back (as source); with ``exported``, also the starter's public functions
    and classes it does not define (rule 3); ``code`` as it is when it or the starter does
    not parse, or nothing applies."""
    try:
        starter_tree = ast.parse(starter) if starter.strip() else ast.Module([], [])
    except PARSE_ERRORS:
        return code, []
    restored: list[str] = []
    for _ in range(MAX_ROUNDS):
        try:
            tree = ast.parse(code)
            missing = unbound_names(code) | (_exported(starter_tree, tree) if exported else set())
        except PARSE_ERRORS:
            break
        if _star_import(tree):
            break  # what ``from m import *`` binds is not known here
        added = False
        for name in sorted(missing):
            source = _binding(name, starter_tree, starter, tree)
            if source is None or source in restored:
                continue
            placed = _placed(code, tree, source, _starter_before(source, starter_tree, starter))
            if placed is None:
                continue
            code, tree, added = placed, ast.parse(placed), True
            restored.append(source)
        if not added:
            break
    try:
        tree = ast.parse(code)
    except PARSE_ERRORS:
        return code, restored
    rewrites = set(definitions(tree)) & set(definitions(starter_tree))  # the starter's file
    if rewrites or any(source in starter for source in restored):  # or its statements
        code = _with_futures(code, tree, starter_tree, starter, restored)
    return code, restored


def _with_futures(
    code: str, tree: ast.Module, starter: ast.Module, starter_src: str, restored: list[str]
) -> str:
    """``code`` (parsed: ``tree``) with the starter's ``from __future__`` imports it lacks put
    first (rule 4), each appended to ``restored``."""
    have = {ast.unparse(s) for s in tree.body if _is_future(s)}
    wanted = [s for s in starter.body if _is_future(s) and ast.unparse(s) not in have]
    sources = [src for s in wanted if (src := _segment(s, starter_src)) is not None]
    if not sources:
        return code
    lines = code.splitlines()
    at = (tree.body[0].end_lineno or 0) if tree.body and _is_docstring(tree.body[0]) else 0
    restored.extend(sources)
    return "\n".join([*lines[:at], *sources, *lines[at:]]).rstrip("\n") + "\n"


def _is_future(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"


def _exported(starter: ast.Module, tree: ast.Module) -> set[str]:
    """The starter's public top-level functions and classes that ``tree`` does not bind."""
    bound = {n for stmt in tree.body for n in _binds(stmt)}
    return {name for name in definitions(starter) if not name.startswith("_")} - bound


def _star_import(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)
        for node in ast.walk(tree)
    )


def unbound_names(code: str) -> frozenset[str]:
    """The names ``code`` reads as globals (in any scope) that it never binds at module
    level and that are no builtins.

    Raises:
        SyntaxError: ``code`` does not compile.
    """
    top = symtable.symtable(code, "solution.py", "exec")
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    bound |= {s.get_name() for s in top.get_symbols() if s.is_namespace()}
    read: set[str] = set()
    for table in _tables(top):
        for sym in table.get_symbols():
            if sym.is_referenced() and (sym.is_global() or table is top):
                read.add(sym.get_name())
    return frozenset(read - bound - _BUILTINS)


def _tables(table: symtable.SymbolTable) -> Iterator[symtable.SymbolTable]:
    yield table
    for child in table.get_children():
        yield from _tables(child)


def _binding(name: str, starter: ast.Module, starter_src: str, tree: ast.Module) -> str | None:
    """The source that binds ``name`` (rules 1 and 2), or None."""
    bound = {n for stmt in tree.body for n in _binds(stmt)}
    for stmt in starter.body:
        if (source := _starter_binding(name, stmt, starter_src)) is not None:
            # never rebind what the candidate binds its own way (``A, B = 1, 2``)
            others = set() if isinstance(stmt, ast.Import | ast.ImportFrom) else _binds(stmt)
            return source if not (others - {name}) & bound else None
    if name in _STDLIB and _only_attribute_base(name, tree):
        return f"import {name}"
    if name in WELL_KNOWN:
        return f"from {WELL_KNOWN[name]} import {name}"
    return None


def _starter_binding(name: str, stmt: ast.stmt, source: str) -> str | None:
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        for alias in stmt.names:
            if (alias.asname or alias.name).split(".")[0] != name:
                continue
            spelled = alias.name + (f" as {alias.asname}" if alias.asname else "")
            if isinstance(stmt, ast.Import):
                return f"import {spelled}"
            return f"from {'.' * stmt.level}{stmt.module or ''} import {spelled}"
        return None
    if isinstance(stmt, DEFINITIONS):
        return _segment(stmt, source) if stmt.name == name else None
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        targets = [stmt.target]
    names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return _segment(stmt, source) if name in names else None


def _segment(stmt: ast.stmt, source: str) -> str | None:
    """``stmt``'s lines in ``source``, decorators included."""
    end = stmt.end_lineno
    if end is None:
        return None
    return "\n".join(source.splitlines()[_first_line(stmt) - 1 : end])


def _only_attribute_base(name: str, tree: ast.Module) -> bool:
    """Whether every read of ``name`` in ``tree`` is ``name.attribute``."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    reads = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name]
    return bool(reads) and all(isinstance(parents.get(n), ast.Attribute) for n in reads)


def _starter_before(source: str, starter: ast.Module, starter_src: str) -> set[str]:
    """The names the starter binds before its statement ``source`` (none: not the
    starter's), so that what is put back keeps the starter's order where it can."""
    before: set[str] = set()
    for stmt in starter.body:
        if _segment(stmt, starter_src) == source:
            return before
        before |= _binds(stmt)
    return set()


def _placed(code: str, tree: ast.Module, source: str, after: set[str]) -> str | None:
    """``code`` with ``source`` inserted where the module's rules place it (after what the
    candidate binds of ``after`` where that is allowed), or None."""
    new = ast.parse(source).body
    if not new:
        return None
    body = tree.body
    if all(isinstance(s, ast.Import | ast.ImportFrom) for s in new):
        index = _after_imports(body)
    else:
        needs = _load_time_reads(new[0])
        provides = {n for s in new for n in _binds(s)}
        earliest = max((i + 1 for i, s in enumerate(body) if _binds(s) & needs), default=0)
        earliest = max(earliest, _after_imports(body))
        latest = min(
            (i for i, s in enumerate(body) if _load_time_reads(s) & provides), default=len(body)
        )
        if earliest > latest:
            return None
        follows = max((i + 1 for i, s in enumerate(body) if _binds(s) & after), default=0)
        index = min(max(earliest, follows), latest)
    lines = code.splitlines()
    block = source.splitlines()
    if all(isinstance(s, ast.Import | ast.ImportFrom) for s in new):
        at = (body[index - 1].end_lineno or 0) if index > 0 else 0  # right after the imports
        out = lines[:at] + block + lines[at:]
    else:
        at = _first_line(body[index]) - 1 if index < len(body) else len(lines)
        out = lines[:at] + block + ["", ""] + lines[at:]
    return "\n".join(out).rstrip("\n") + "\n"


def _after_imports(body: list[ast.stmt]) -> int:
    """The index after the module docstring and the last top-level import."""
    index = 1 if body and _is_docstring(body[0]) else 0
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            index = i + 1
    return index


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _first_line(stmt: ast.stmt) -> int:
    """``stmt``'s first line, its decorators' included."""
    decorators: list[ast.expr] = getattr(stmt, "decorator_list", [])
    return min([stmt.lineno, *(d.lineno for d in decorators)])


def _binds(stmt: ast.stmt) -> set[str]:
    """The module-level names ``stmt`` binds."""
    if isinstance(stmt, DEFINITIONS):
        return {stmt.name}
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return {
        n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def _load_time_reads(stmt: ast.stmt) -> set[str]:
    """The names ``stmt`` reads while the module is imported: all of it but the bodies of
    functions (their decorators, defaults and annotations are read then)."""
    parts: list[ast.AST]
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        parts = _function_head(stmt)
    elif isinstance(stmt, ast.ClassDef):
        parts = [*stmt.decorator_list, *stmt.bases, *stmt.keywords]
        for inner in stmt.body:
            if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                parts.extend(_function_head(inner))
            else:
                parts.append(inner)
    else:
        parts = [stmt]
    return {
        n.id
        for part in parts
        for n in ast.walk(part)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def _function_head(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    head: list[ast.AST] = [*func.decorator_list, func.args]
    if func.returns is not None:
        head.append(func.returns)
    return head


class RestoreDropped:
    """The pass: :func:`restore_dropped` on every non-empty answer (a draw too), the starter's
    public names kept for a bugfix or feature."""

    def repair(self, task: Task, code: str, *, edit_of: str | None) -> Repaired:
        exported = task.category in EDIT_CATEGORIES
        repaired, restored = restore_dropped(code, task.starter, exported=exported)
        if not restored:
            return Repaired(code)
        shown = "; ".join(" ".join(r.split())[:80] for r in restored)
        return Repaired(repaired, f"restored what the answer dropped: {shown}")
