import ast
from pathlib import Path

import solution


def _tree() -> ast.Module:
    return ast.parse(Path(solution.__file__).read_text())


def _function(name: str) -> ast.FunctionDef:
    for node in _tree().body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise AssertionError(f"solution.py has no top-level function {name}()")


def _body_nodes(func: ast.FunctionDef) -> list[ast.AST]:
    """Every node of func's body (not its signature or annotations)."""
    return [n for stmt in func.body for n in ast.walk(stmt)]


def _called_names(func: ast.FunctionDef) -> set[str]:
    return {
        n.func.id
        for n in _body_nodes(func)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }


def test_behaviour_unchanged() -> None:
    assert solution.has_admin([{"role": "user"}, {"role": "admin"}])
    assert not solution.has_admin([{"role": "user"}, {"role": "guest"}])
    assert not solution.has_admin([])


def test_structure_uses_any() -> None:
    assert "any" in _called_names(_function("has_admin"))


def test_structure_no_for_statement() -> None:
    assert not any(isinstance(n, ast.For) for n in _body_nodes(_function("has_admin")))
