"""Examples that need what came before them: a doctest session's later lines.

A brief (or a README or docstring it quotes) often shows a class at work as one session::

    >>> cache = LRUCache(2)
    >>> cache.put("a", 1)
    >>> cache.get("a")
    1

``cache.get("a")`` is no example on its own: its value holds only after the lines above it.
A *scenario* is such an example with its *setup*, the session's statements before it, run in
order (expressions too: ``cache.get("a")`` marks ``"a"`` recently used, so a later line may
depend on it). :func:`scenarios` says whether a session line is one, by these rules
(nothing is guessed; anything else gives no example):

- the session parses, statement by statement; a line whose output is a traceback ends what
  can be read of it (what follows depends on an exception);
- imports: a standard-library module's stays in the setup, unless it binds a name the
  starter defines (``from statistics import mean`` where the task writes ``mean``: the
  session shows the library's, not the task's); ``from M import ...`` of names the starter
  defines is dropped (the check imports them from ``solution``); any other import (the
  project's own package, a third-party one) means the session is not ours to run;
- no power with an exponent beyond a literal up to
  :data:`~swapos.passes.example_values.MAX_EXPONENT` (``10**10000``: its check could take
  the check's whole time);
- every name the session reads is bound: by the session itself, the starter, the builtins,
  or an imported standard module; outside a bugfix, a name nothing binds may be *called*
  (``RingBuffer(3)``: what the brief asks for), never read bare;
- the session uses the task's code: a name the starter defines, or one it calls that way;
- the line's output is a value (:func:`~swapos.passes.example_values.value_text`) on
  one line, or what ``print`` shows (``>>> print(list(buf))`` then ``[1, 2]``);
- the setup holds something besides imports, ``name = value`` lines and calls of functions
  on values: a session of only those, then a plain call, is the brief reader's own
  (:mod:`swapos.passes.brief_examples`, its givens).
"""

from __future__ import annotations

import ast
import builtins
import sys
import textwrap
from collections.abc import Sequence
from typing import Final

from swapos.passes.example_values import MAX_EXPONENT, Example, is_value, value_text
from swapos.pipeline.bindings import names_bound
from swapos.pipeline.extract import PARSE_ERRORS

_BUILTINS: Final = frozenset(dir(builtins))
_STDLIB: Final = frozenset(sys.stdlib_module_names)
_TRACEBACK: Final = ("Traceback (most recent call last)", "Traceback (innermost last)")


class Line:
    """One statement of a session (``>>>`` and its ``...`` lines) and the lines it shows."""

    __slots__ = ("output", "source")

    def __init__(self, source: str, output: Sequence[str]) -> None:
        self.source, self.output = source, list(output)


def scenarios(
    session: Sequence[Line],
    known: frozenset[str],
    may_add: bool,
    makers: frozenset[str] = frozenset(),
) -> list[Example]:
    """The scenario examples of one doctest ``session`` (see the module's rules).

    Args:
        session: its statements in order, each with the lines it shows.
        known: the names the starter defines.
        may_add: whether a name nothing binds may be called (not in a bugfix).
        makers: the value types a wanted value may construct.
    """
    setup: list[str] = []
    found: list[Example] = []
    for line in session:
        if line.output and line.output[0].strip().startswith(_TRACEBACK):
            break
        statements = parsed_statements(line.source)
        if statements is None:
            break
        kept = _kept(statements, known)
        if kept is None:
            return []
        if len(kept) == 1 and isinstance(kept[0], ast.Expr) and setup:
            example = _example(kept[0].value, setup, line.output, makers)
            if example is not None:
                found.append(example)
        setup.extend(ast.unparse(st) for st in kept)
    if not found or not _runs(setup_of(found[-1]), known, may_add):
        return []
    return [ex for ex in found if _beyond_givens(ex, makers)]


def setup_of(example: Example) -> list[ast.stmt]:
    """The statements of ``example``'s setup and its call, as one module's body."""
    return ast.parse("\n".join([*example.setup, example.call])).body


def parsed_statements(source: str) -> list[ast.stmt] | None:
    """The statements of ``source`` (dedented), or None when it does not parse."""
    try:
        return ast.parse(textwrap.dedent(source)).body
    except PARSE_ERRORS:
        return None


def _kept(statements: list[ast.stmt], known: frozenset[str]) -> list[ast.stmt] | None:
    """``statements`` without imports of the starter's names; None when one imports what
    the check cannot (a module that is not the standard library's)."""
    kept: list[ast.stmt] = []
    for st in statements:
        if any(_huge_power(node) for node in ast.walk(st)):
            return None
        if not isinstance(st, ast.Import | ast.ImportFrom):
            kept.append(st)
            continue
        binds = {(a.asname or a.name).split(".")[0] for a in st.names}
        if isinstance(st, ast.ImportFrom):
            stdlib = st.level == 0 and (st.module or "").split(".")[0] in _STDLIB
        else:
            stdlib = all(a.name.split(".")[0] in _STDLIB for a in st.names)
        if stdlib and not binds & known:
            kept.append(st)
        elif stdlib or isinstance(st, ast.Import) or not binds <= known:
            return None  # the library's ``mean`` where the task writes one; a package's
    return kept


def _huge_power(node: ast.AST) -> bool:
    """A power whose exponent is not a literal up to :data:`MAX_EXPONENT` (its value could
    take the check's whole time)."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow)):
        return False
    exponent = node.right
    return not (
        isinstance(exponent, ast.Constant)
        and isinstance(exponent.value, int | float)
        and abs(exponent.value) <= MAX_EXPONENT
    )


def _example(
    node: ast.expr, setup: list[str], output: list[str], makers: frozenset[str]
) -> Example | None:
    """The example of an expression line with its output, after ``setup``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
        and len(node.args) == 1
        and not node.keywords
    ):
        if not output:
            return None
        text = "\n".join(line.rstrip() for line in output)
        arg = ast.unparse(node.args[0])
        return Example(call=arg, want=repr(text), printed=True, setup=tuple(setup))
    if len(output) != 1 or not (want := value_text(output[0].strip(), makers)):
        return None
    return Example(call=ast.unparse(node), want=want, setup=tuple(setup))


def _runs(body: list[ast.stmt], known: frozenset[str], may_add: bool) -> bool:
    """Whether every name the session reads is bound, and it uses the task's code."""
    bound = set(_BUILTINS) | set(known)
    uses_task = False
    for st in body:
        bound |= names_bound(st)
    called = {
        node.func.id
        for st in body
        for node in ast.walk(st)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    for st in body:
        for node in ast.walk(st):
            if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
                continue
            if node.id in known or (may_add and node.id in called and node.id not in bound):
                uses_task = True
            elif node.id not in bound:
                return False
    return uses_task


def _beyond_givens(example: Example, makers: frozenset[str]) -> bool:
    """Whether ``example`` needs its setup run: not only imports, ``name = value`` lines
    and calls of functions on values before a plain call (the brief reader's own examples,
    its givens substituted)."""
    body = setup_of(example)
    plain_setup = all(
        isinstance(st, ast.Import | ast.ImportFrom)
        or (
            isinstance(st, ast.Assign)
            and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)
            and is_value(st.value, makers)
        )
        or (isinstance(st, ast.Expr) and _plain_call(st.value, makers))
        for st in body[:-1]
    )
    call = body[-1]
    return not (plain_setup and isinstance(call, ast.Expr) and _plain_call(call.value))


def _plain_call(node: ast.expr, makers: frozenset[str] | None = None) -> bool:
    """A function name applied to values (to anything, without ``makers``)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return False
    args = [*node.args, *(k.value for k in node.keywords)]
    return makers is None or all(is_value(a, makers) for a in args)
