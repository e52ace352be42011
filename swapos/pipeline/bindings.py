"""The names a piece of Python binds, anywhere in it: one definition of "bound" for the
readers that ask whether a name is defined (brief scenarios, brief names, pre-grade defects)."""

from __future__ import annotations

import ast


def names_bound(node: ast.AST, *, attributes: bool = False) -> set[str]:
    """Every name ``node`` binds anywhere inside it: assignment and loop targets, imports
    (a dotted import binds its first part), parameters, functions and classes; with
    ``attributes``, also the attributes it assigns (``self.size = ...``)."""
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
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
