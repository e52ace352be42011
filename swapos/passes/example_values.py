"""What one example is, and when a piece of text is one: a call of a known function on
values, and the value it should have.

Shared by the docstring reader (:mod:`swapos.passes.selfcheck`) and the brief reader
(:mod:`swapos.passes.brief_examples`). Nothing here guesses: text that does not parse as
exactly that shape is not an example.

A *value* is what an example's arguments and wanted result may be:

- a literal (what :func:`ast.literal_eval` accepts: numbers, strings, lists, dicts,
  ``True``/``False``/``None``...);
- arithmetic on numbers (``1024 * 1024``, ``1023.96 * 1024 ** 3``, ``-0.5``), a power only
  with a literal exponent of at most :data:`MAX_EXPONENT`;
- a *construction*: a value type applied to values (``Interval(1, 6)``,
  ``date(2024, 2, 29)``, ``Decimal("1.50")``, ``datetime.timedelta(days=1)``), the form
  docs print a value in when it is no literal (its ``repr``). The value types are the ones
  the starter makes available to the check (:func:`value_makers`): its own classes that
  compare by value, and the standard library's value types it imports. A class that
  compares by identity is never one: its example would fail every correct answer.
- lists, tuples, sets and dicts of values.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Final

import msgspec

from swapos.pipeline.extract import PARSE_ERRORS

EVAL_ERRORS: Final = (*PARSE_ERRORS, TypeError)
"""What parsing a piece of text and evaluating it as a literal may raise (``literal_eval`` of
``{[1]: 2}`` raises ``TypeError``)."""

MAX_EXPONENT: Final = 64
"""The largest literal exponent a value's ``**`` may have (``10 ** 10 ** 10`` is no value:
its check would never end)."""

STDLIB_VALUE_TYPES: Final[dict[str, frozenset[str]]] = {
    "datetime": frozenset({"date", "datetime", "time", "timedelta", "timezone"}),
    "decimal": frozenset({"Decimal"}),
    "fractions": frozenset({"Fraction"}),
    "pathlib": frozenset({"Path", "PurePath", "PurePosixPath", "PureWindowsPath"}),
    "ipaddress": frozenset(
        {"IPv4Address", "IPv6Address", "IPv4Network", "IPv6Network", "ip_address", "ip_network"}
    ),
    "uuid": frozenset({"UUID"}),
    "collections": frozenset({"Counter", "OrderedDict", "deque"}),
}
"""The standard library's types (module -> names) whose values compare by value and print
as their own construction."""

_ARITHMETIC: Final = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


class Example(msgspec.Struct, frozen=True, kw_only=True):
    """One example: an expression and the value it should have (both Python source); when
    ``printed``, ``want`` is the text ``print(call)`` shows (a doctest of a ``print``), each
    line's trailing spaces aside; ``setup``, the statements run before it, in order (a
    doctest session's earlier lines: :mod:`swapos.passes.brief_scenarios`)."""

    call: str
    want: str
    printed: bool = False
    setup: tuple[str, ...] = ()

    def stated(self) -> str:
        """The wanted value as a message states it, with the setup it holds after, on one
        line: ``1 after cache = LRUCache(2); cache.put('a', 1)``."""
        if not self.setup:
            return self.want
        return f"{self.want} after " + "; ".join(" ".join(s.split()) for s in self.setup)


def make_example(
    call: str,
    want: str,
    callee: str | Callable[[str], bool],
    makers: frozenset[str] = frozenset(),
    givens: Mapping[str, str] | None = None,
) -> Example | None:
    """``call`` and ``want`` as an :class:`Example`, or None when they are not one.

    ``call`` must be a plain name applied to values (``f(1, "a")``, ``f(x=[1])``,
    ``f([Interval(1, 3)])``), the name ``callee`` itself or one that ``callee`` accepts;
    ``want`` must be a value (:func:`value_text`). ``makers`` are the value types a
    construction may name (:func:`value_makers`); ``givens`` the names the text gave a value
    (``config = {...}`` in a brief: name -> the value's source), which the example's call
    reads in their place (``get_path(config, "a")`` is checked as ``get_path({...}, 'a')``).
    A trailing ``,`` or ``;`` is dropped from both.
    """
    call, want = call.strip().rstrip(",;"), value_text(want.strip().rstrip(",;"), makers)
    if not want or want.startswith(">>>"):
        return None
    try:
        node = ast.parse(call, mode="eval").body
    except EVAL_ERRORS:
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None
    name = node.func.id
    if not (name == callee if isinstance(callee, str) else callee(name)):
        return None
    if givens and (given := _with_givens(node, givens)) is not None:
        call, node = ast.unparse(given), given
    elif "\n" in call:  # a doctest statement over ``...`` lines: one line
        call = ast.unparse(node)
    if not all(is_value(arg, makers) for arg in [*node.args, *(k.value for k in node.keywords)]):
        return None  # e.g. ``is_happy(abc)``: the text meant a string it did not quote
    return Example(call=call, want=want)


def _with_givens(call: ast.Call, givens: Mapping[str, str]) -> ast.Call | None:
    """``call`` with each given name in its arguments replaced by its value; None when its
    arguments name none."""
    replaced = False

    class Given(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.expr:
            nonlocal replaced
            if node.id not in givens:
                return node
            replaced = True
            return ast.parse(givens[node.id], mode="eval").body

    args = [Given().visit(a) for a in call.args]
    keywords = [ast.keyword(arg=k.arg, value=Given().visit(k.value)) for k in call.keywords]
    if not replaced:
        return None
    return ast.Call(func=call.func, args=args, keywords=keywords)


def value_text(want: str, makers: frozenset[str] = frozenset()) -> str:
    """``want`` as Python source of a value (:func:`is_value`), or "": a trailing comment or
    full stop dropped, ``true``/``false`` read as ``True``/``False``."""
    want = {"true": "True", "false": "False"}.get(want, want)
    for text in (want.split(" #", 1)[0].strip(), want, want.rstrip(".")):
        try:
            node = ast.parse(text, mode="eval").body
        except EVAL_ERRORS:
            continue
        if is_value(node, makers):
            return text
    return ""


def is_value(node: ast.expr, makers: frozenset[str] = frozenset()) -> bool:
    """Whether ``node`` is a value (the module docstring's kinds), constructions naming only
    ``makers``."""
    if is_literal(node):
        return True
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(is_value(e, makers) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and is_value(k, makers) for k in node.keys) and all(
            is_value(v, makers) for v in node.values
        )
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        return _is_arithmetic(node)
    if isinstance(node, ast.Call):
        return (
            _dotted(node.func) in makers
            and all(is_value(a, makers) for a in node.args)
            and all(k.arg is not None and is_value(k.value, makers) for k in node.keywords)
        )
    return False


def is_literal(node: ast.expr) -> bool:
    """Whether ``node`` is a literal (what :func:`ast.literal_eval` accepts)."""
    try:
        ast.literal_eval(node)
    except EVAL_ERRORS:
        return False
    return True


def _is_arithmetic(node: ast.expr) -> bool:
    """Whether ``node`` is arithmetic on number literals, with small literal exponents."""
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd)) and _is_arithmetic(node.operand)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC):
        if isinstance(node.op, ast.Pow):
            exponent = node.right
            if isinstance(exponent, ast.UnaryOp) and isinstance(exponent.op, ast.USub):
                exponent = exponent.operand
            return (
                _is_arithmetic(node.left)
                and isinstance(exponent, ast.Constant)
                and type(exponent.value) is int
                and exponent.value <= MAX_EXPONENT
            )
        return _is_arithmetic(node.left) and _is_arithmetic(node.right)
    return False


def _dotted(node: ast.expr) -> str:
    """``a.b.c`` for a chain of attributes on a name, else ""."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def value_makers(starter: str) -> frozenset[str]:
    """The value types ``starter`` makes available to a check that imports the modules of
    :data:`STDLIB_VALUE_TYPES` and then runs ``from solution import *``: the names of

    - its top-level classes that compare by value: a ``@dataclass`` (not ``eq=False``), a
      ``NamedTuple`` or ``Enum`` subclass, a class that defines ``__eq__``, a
      ``namedtuple(...)`` it assigns;
    - the standard library's value types it imports by name (``from datetime import date
      as d`` gives ``d``);
    - ``M.T`` for each such type ``T`` of a module ``M`` that the starter imports as a
      module (``import datetime as dt`` gives ``dt.date``), or whose name it leaves free (a
      docstring prints ``datetime.date(2024, 1, 1)`` where the code says ``from datetime
      import date``; the check's own ``import datetime`` makes it mean the same);

    the ones a star import leaves out (an ``__all__`` without them) excepted. Empty when
    ``starter`` does not parse.
    """
    try:
        tree = ast.parse(starter)
    except PARSE_ERRORS:
        return frozenset()
    found: set[str] = set()
    modules: dict[str, str] = {}  # a module of the table -> the name the starter binds it to
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and _compares_by_value(node):
            found.add(node.name)
        elif isinstance(node, ast.Assign) and _is_namedtuple(node.value):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            types = STDLIB_VALUE_TYPES.get(node.module, frozenset())
            found.update(a.asname or a.name for a in node.names if a.name in types)
        elif isinstance(node, ast.Import):
            modules.update((a.name, a.asname or a.name) for a in node.names)
    bound = _bound_names(tree)
    for module, types in STDLIB_VALUE_TYPES.items():
        names = {modules[module]} if module in modules else set()
        names |= set() if module in bound else {module}
        found.update(f"{name}.{t}" for name in names for t in types)
    exported = _all_names(tree)
    if exported is None:
        return frozenset(n for n in found if not n.startswith("_"))
    return frozenset(n for n in found if n in exported or n.split(".")[0] in STDLIB_VALUE_TYPES)


def _compares_by_value(node: ast.ClassDef) -> bool:
    bases = {_dotted(b).rsplit(".", 1)[-1] for b in node.bases}
    if bases & {"NamedTuple", "Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"}:
        return True
    if any(
        isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == "__eq__"
        for d in node.body
    ):
        return True
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if _dotted(target).rsplit(".", 1)[-1] != "dataclass":
            continue
        keywords = deco.keywords if isinstance(deco, ast.Call) else []
        return not any(
            k.arg == "eq" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in keywords
        )
    return False


def _is_namedtuple(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and _dotted(node.func).rsplit(".", 1)[-1] == "namedtuple"


def _bound_names(tree: ast.Module) -> frozenset[str]:
    """The names ``tree``'s top-level statements bind (imports, definitions, assignments)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return frozenset(names)


def _all_names(tree: ast.Module) -> frozenset[str] | None:
    """The names of a literal top-level ``__all__``, or None when there is none."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, (ast.List, ast.Tuple))
        ):
            return frozenset(
                e.value
                for e in node.value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            )
    return None
