"""What one example is, and when a piece of text is one: a call of a known function on
literal arguments, and a literal value it should have.

Shared by the docstring reader (:mod:`swapos.pipeline.selfcheck`) and the brief reader
(:mod:`swapos.pipeline.brief_examples`). Nothing here guesses: text that does not parse as
exactly that shape is not an example.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import msgspec

_PARSE_ERRORS = (SyntaxError, ValueError, TypeError, MemoryError, RecursionError)


class Example(msgspec.Struct, frozen=True, kw_only=True):
    """One example: an expression and the value it should have (both Python source)."""

    call: str
    want: str


def make_example(call: str, want: str, callee: str | Callable[[str], bool]) -> Example | None:
    """``call`` and ``want`` as an :class:`Example`, or None when they are not one.

    ``call`` must be a plain name applied to literal arguments (``f(1, "a")``, ``f(x=[1])``),
    the name ``callee`` itself or one that ``callee`` accepts; ``want`` must be a literal
    (:func:`literal_value`). A trailing ``,`` or ``;`` is dropped from both.
    """
    call, want = call.strip().rstrip(",;"), literal_value(want.strip().rstrip(",;"))
    if not want or want.startswith(">>>"):
        return None
    try:
        node = ast.parse(call, mode="eval").body
    except _PARSE_ERRORS:
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None
    name = node.func.id
    if not (name == callee if isinstance(callee, str) else callee(name)):
        return None
    if not all(is_literal(arg) for arg in [*node.args, *(k.value for k in node.keywords)]):
        return None  # e.g. ``is_happy(abc)``: the text meant a string it did not quote
    return Example(call=call, want=want)


def literal_value(want: str) -> str:
    """``want`` as a Python literal, or "": a trailing comment or full stop dropped,
    ``true``/``false`` read as ``True``/``False``."""
    want = {"true": "True", "false": "False"}.get(want, want)
    for text in (want.split(" #", 1)[0].strip(), want, want.rstrip(".")):
        try:
            ast.literal_eval(text)
        except _PARSE_ERRORS:
            continue
        return text
    return ""


def is_literal(node: ast.expr) -> bool:
    """Whether ``node`` is a literal (what :func:`ast.literal_eval` accepts)."""
    try:
        ast.literal_eval(node)
    except _PARSE_ERRORS:
        return False
    return True
