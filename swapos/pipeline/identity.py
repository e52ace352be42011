"""A candidate's identity: what makes two candidates the same code."""

from __future__ import annotations

import ast


def candidate_identity(code: str) -> str:
    """A candidate's identity: its syntax tree, where a redefined function or class counts
    once, as defined last (comments, layout and docstrings do not count: the module's, its
    functions' and classes'). So a chat model's rewrite after the prompt's stub equals the
    same function written as a continuation, and a starter written back without its module
    docstring is still the starter."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return " ".join(code.split())
    body: dict[object, ast.stmt] = {}
    statements = tree.body[1:] if tree.body and _is_docstring(tree.body[0]) else tree.body
    for i, node in enumerate(statements):
        key: object = i
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.body and _is_docstring(node.body[0]):
                node.body = node.body[1:] or [ast.Pass()]
            key = node.name
        body.pop(key, None)
        body[key] = node
    try:
        return ast.dump(ast.Module(body=list(body.values()), type_ignores=[]))
    except (RecursionError, MemoryError):
        return " ".join(code.split())


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def candidate_shape(code: str) -> str:
    """A candidate's *shape*: its identity (:func:`candidate_identity`) with the names each
    function binds (its arguments, locals, loop and comprehension variables, nested
    functions) numbered in order of first use. Two candidates with one shape differ only in
    comments, layout, docstrings or such names: the same code in substance. The names a
    test imports (top-level functions and classes) and attributes still count."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return candidate_identity(code)
    try:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                _number_locals(node)
        return candidate_identity(ast.unparse(tree))
    except (RecursionError, MemoryError):
        return candidate_identity(code)


def _number_locals(func: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
    bound: dict[str, str] = {}
    for node in ast.walk(func):
        name = None
        if isinstance(node, ast.arg):
            name = node.arg
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            name = node.id
        elif node is not func and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = node.name
        if name is not None and not name.startswith("_v"):
            bound.setdefault(name, f"_v{len(bound)}")
    for node in ast.walk(func):
        if isinstance(node, ast.arg) and node.arg in bound:
            node.arg = bound[node.arg]
        elif isinstance(node, ast.Name) and node.id in bound:
            node.id = bound[node.id]
        elif (
            node is not func
            and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name in bound
        ):
            node.name = bound[node.name]
