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
