"""An *edit* answer: only the definitions of ``solution.py`` that change, spliced into the file.

A model asked for "the complete solution.py" of a repository task writes the whole file again,
most of it copied from the starter, token by token; asked for only what it changes, it writes
a function or two. With the ``open_asked`` pass, the first request of a ``bugfix`` or
``feature`` task whose brief asks for a new definition asks a chat coder for that
(:mod:`swapos.pipeline.chat_prompts`), and this module puts its answer back into the file
the prompt showed it, by name, on the syntax tree:

- a function or class that the file defines at the same level is replaced where it stands
  (its decorators with it); a class that the answer writes only in part (some of its methods)
  is merged member by member, by the same rules one level down; so is a method written bare,
  at the top level (a function the file does not define, taking ``self`` or ``cls`` first,
  named as a method of exactly one of the file's classes);
- an assignment whose targets the file assigns at the same level replaces that assignment;
- an ``import`` the file lacks goes after the file's last top-level import (or its docstring);
- a new function, class or assignment goes at the end of the file (of the class, for a member);
- a call or bare expression at top level (a usage example, ``print(...)``) and an
  ``if __name__ == "__main__":`` block are left out: they would run on import.

An answer that defines every top-level function and class of the file is a whole file and is
taken as it is. An answer or a file that does not parse is not merged (``None``): the caller
keeps the answer as it is, and its grade says what is wrong with it.

A ``refactor`` is not asked for edits: it restructures (removes, renames, moves code), and a
splice by name only replaces and adds. A ``completion`` task's answer is a function already.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Final

from swapos.data.task import Task
from swapos.pipeline.bindings import DEFINITIONS, definitions
from swapos.pipeline.extract import PARSE_ERRORS

_IMPORTS: Final = (ast.Import, ast.ImportFrom)
EDIT_CATEGORIES: Final = frozenset({"bugfix", "feature"})
"""The task categories whose coders may be asked for edits."""


def edits_apply(task: Task) -> bool:
    """Whether ``task``'s coders may answer with edits: a bugfix or feature with a starter."""
    return task.category in EDIT_CATEGORIES and bool(task.starter.strip())


def merge_edit(base: str, answer: str) -> str | None:
    """``base`` (a whole ``solution.py``) with the definitions of ``answer`` spliced in, by
    the rules of this module; ``answer`` itself when it is a whole file; None when either
    does not parse."""
    try:
        base_tree, answer_tree = ast.parse(base), ast.parse(answer)
    except PARSE_ERRORS:
        return None
    defined, written = set(definitions(base_tree)), set(definitions(answer_tree))
    if defined and defined <= written:
        return answer
    lines = base.splitlines()
    module = _Level(lines, base_tree.body, 1, len(lines), "", answer.splitlines())
    return "\n".join(module.splice(answer_tree.body)).strip("\n") + "\n"


class _Level:
    """One level of the file being edited: the module, or one class (lines ``first..last``,
    1-based, inclusive; its statements ``body``, at ``indent``), and the answer's lines."""

    def __init__(  # noqa: PLR0917  (the file's lines, the level, the answer's lines)
        self,
        lines: list[str],
        body: Sequence[ast.stmt],
        first: int,
        last: int,
        indent: str,
        answer_lines: list[str],
    ) -> None:
        self.lines, self.body, self.first, self.last = lines, body, first, last
        self.indent, self.answer_lines = indent, answer_lines
        self.module = not indent
        self.replaced: dict[int, list[str]] = {}  # index in body -> the lines there now
        self.imports: list[str] = []
        self.appended: list[str] = []

    def class_level(self, at: int, members: Sequence[ast.stmt]) -> list[str]:
        """The class at ``at`` in ``body`` with ``members`` (the answer's) put in."""
        cls = self.body[at]
        assert isinstance(cls, ast.ClassDef)
        start, end = _span(cls)
        level = _Level(
            self.lines, cls.body, start, end, _member_indent(self.lines, cls), self.answer_lines
        )
        return level.splice(members)

    def splice(self, answer_body: Sequence[ast.stmt]) -> list[str]:
        """This level's lines with ``answer_body``'s statements put in."""
        have = {ast.unparse(n) for n in self.body if isinstance(n, _IMPORTS)}
        methods: dict[int, list[ast.stmt]] = {}  # a class's index in body -> bare methods
        for node in answer_body:
            owner = _owner(self.body, node) if self.module else None
            if owner is not None:
                methods.setdefault(owner, []).append(node)
            elif isinstance(node, _IMPORTS):
                if self.module and ast.unparse(node) not in have:
                    self.imports.append(_source(self.answer_lines, node))
            elif not _left_out(node):
                self._put(node)
        for at, members in methods.items():
            if at not in self.replaced:
                self.replaced[at] = self.class_level(at, members)
        return self._write()

    def _put(self, node: ast.stmt) -> None:
        text = _reindent(_source(self.answer_lines, node), self.indent)
        at = _same(self.body, node)
        if at is None:
            gap = ["", ""] if self.module else [""]
            self.appended.extend([*gap, *text] if isinstance(node, DEFINITIONS) else text)
            return
        old = self.body[at]
        if isinstance(old, ast.ClassDef) and isinstance(node, ast.ClassDef) and _partial(old, node):
            self.replaced[at] = self.class_level(at, node.body)
        else:
            self.replaced[at] = text

    def _write(self) -> list[str]:
        lines, imports = self.lines, self.imports
        out: list[str] = []
        cursor = self.first
        import_at = _import_point(self.body) if self.module else None
        for i, node in enumerate(self.body):
            start, end = _span(node)
            if i in self.replaced:
                out.extend(lines[cursor - 1 : start - 1])
                out.extend(self.replaced[i])
                cursor = end + 1
            if i == import_at and imports:
                out.extend(lines[cursor - 1 : end])
                out.extend(imports)
                imports = []
                cursor = end + 1
        if imports:  # no import and no docstring to follow: on top
            out = [*imports, "", *out]
        out.extend(lines[cursor - 1 : self.last])
        if self.appended:
            while out and not out[-1].strip():
                out.pop()
            out.extend(self.appended)
        return out


def _left_out(node: ast.stmt) -> bool:
    """A statement an edit never carries: a bare expression (a docstring, a usage call) or an
    ``if __name__ == "__main__":`` block."""
    if isinstance(node, ast.Expr):
        return True
    if isinstance(node, ast.If):
        test = node.test
        return (
            isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
        )
    return False


def _same(body: Sequence[ast.stmt], node: ast.stmt) -> int | None:
    """Where ``body`` has the statement ``node`` replaces: a definition of the same name, or
    an assignment to the same names."""
    key = _key(node)
    if key is None:
        return None
    for i, old in enumerate(body):
        if _key(old) == key:
            return i
    return None


def _key(node: ast.stmt) -> tuple[str, ...] | None:
    if isinstance(node, DEFINITIONS):
        return ("def", node.name)
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AnnAssign):  # not ``X += 1``: it needs the ``X =`` it follows
        targets = [node.target]
    names = tuple(sorted(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)))
    return ("=", *names) if names else None


def _owner(body: Sequence[ast.stmt], node: ast.stmt) -> int | None:
    """The class of ``body`` whose method ``node`` is, written bare at the top level (a
    function the module does not define, named as exactly one class's method, taking
    ``self`` or ``cls`` first); None otherwise."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or _same(body, node):
        return None
    args = node.args.posonlyargs + node.args.args
    if not args or args[0].arg not in {"self", "cls"}:
        return None
    owners = [
        i
        for i, cls in enumerate(body)
        if isinstance(cls, ast.ClassDef)
        and any(isinstance(m, DEFINITIONS) and m.name == node.name for m in cls.body)
    ]
    return owners[0] if len(owners) == 1 else None


def _partial(old: ast.ClassDef, new: ast.ClassDef) -> bool:
    """The answer's class leaves out a method the file's class has: merge, not replace."""
    return not set(definitions(old)) <= set(definitions(new))


def _span(node: ast.stmt) -> tuple[int, int]:
    """The lines ``node`` takes, its decorators included (1-based, inclusive)."""
    decorators = getattr(node, "decorator_list", [])
    start = min([node.lineno, *(d.lineno for d in decorators)])
    end = node.end_lineno if node.end_lineno is not None else node.lineno
    return start, end


def _source(lines: list[str], node: ast.stmt) -> str:
    start, end = _span(node)
    return "\n".join(lines[start - 1 : end])


def _reindent(text: str, indent: str) -> list[str]:
    """``text``'s lines moved from their own indentation to ``indent``."""
    rows = text.splitlines()
    first = rows[0] if rows else ""
    own = first[: len(first) - len(first.lstrip())]
    if own == indent:
        return rows
    out = []
    for row in rows:
        if not row.strip():
            out.append("")
        elif row.startswith(own):
            out.append(f"{indent}{row[len(own) :]}")
        else:  # a line of a multi-line string that starts left of the statement: as it is
            out.append(row)
    return out


def _member_indent(lines: list[str], cls: ast.ClassDef) -> str:
    first = lines[cls.body[0].lineno - 1]
    return first[: len(first) - len(first.lstrip())]


def _import_point(body: Sequence[ast.stmt]) -> int | None:
    """The index of the statement new imports follow: the last top-level import, else the
    module docstring; None when there is neither."""
    last = None
    for i, node in enumerate(body):
        if isinstance(node, _IMPORTS):
            last = i
    if last is not None:
        return last
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        return 0
    return None
