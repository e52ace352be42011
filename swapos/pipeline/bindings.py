"""The names a piece of Python binds, anywhere in it: one definition of "bound" for the
readers that ask whether a name is defined (brief scenarios, brief names, pre-grade defects);
and the functions and classes a module defines at its top level."""

from __future__ import annotations

import ast
from typing import Final

DEFINITIONS: Final = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
"""The statements that define a function or a class."""


def definitions(tree: ast.Module | ast.ClassDef) -> list[str]:
    """The names of the functions and classes ``tree`` defines at its top level (a class: in
    its body), in order."""
    return [stmt.name for stmt in tree.body if isinstance(stmt, DEFINITIONS)]


def names_bound(node: ast.AST, *, attributes: bool = False) -> set[str]:
    """Every name ``node`` binds anywhere inside it: assignment and loop targets, imports
    (a dotted import binds its first part), parameters, functions and classes; with
    ``attributes``, also the attributes it assigns (``self.size = ...``)."""
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, DEFINITIONS):
            names.add(sub.name)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.add(sub.id)
        elif isinstance(sub, ast.alias):
            names.add((sub.asname or sub.name).split(".")[0])
        elif isinstance(sub, ast.arg):
            names.add(sub.arg)
        elif attributes and isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store):
            names.add(sub.attr)
    return names
