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

import pytest


def test_behaviour_unchanged() -> None:
    assert solution.apply_op("add", 2, 3) == 5
    assert solution.apply_op("sub", 2, 3) == -1
    assert solution.apply_op("mul", 2, 3) == 6
    assert solution.apply_op("div", 3, 2) == 1.5


def test_unknown_operation_raises() -> None:
    with pytest.raises(ValueError):
        solution.apply_op("pow", 2, 3)


def test_structure_operations_table() -> None:
    table = solution.OPERATIONS
    assert isinstance(table, dict)
    assert set(table) == {"add", "sub", "mul", "div"}
    assert table["sub"](5, 3) == 2
    assert table["div"](1, 4) == 0.25


def test_structure_no_if_elif_chain() -> None:
    nodes = _body_nodes(_function("apply_op"))
    assert sum(isinstance(n, ast.If) for n in nodes) <= 1
    for n in nodes:
        if isinstance(n, ast.Compare):
            operands = [n.left, *n.comparators]
            assert not any(
                isinstance(o, ast.Constant) and isinstance(o.value, str) for o in operands
            ), f"apply_op still compares with a string literal on line {n.lineno}"
