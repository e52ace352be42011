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
    assert solution.pair_sums([1, 2, 3], [10, 20, 30]) == [11, 22, 33]
    assert solution.pair_sums([-1], [1]) == [0]
    assert solution.pair_sums([], []) == []


def test_structure_uses_zip() -> None:
    assert "zip" in _called_names(_function("pair_sums"))


def test_structure_no_range_len_or_indexing() -> None:
    func = _function("pair_sums")
    called = _called_names(func)
    assert "range" not in called
    assert "len" not in called
    assert not any(isinstance(n, ast.Subscript) for n in _body_nodes(func))
