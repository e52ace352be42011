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


ORDERS = [
    {"id": "A1", "amount": 99.5},
    {"id": "B2", "amount": 100},
    {"id": "C3", "amount": 12.25},
    {"id": "D4", "amount": 250.0},
]


def test_behaviour_unchanged() -> None:
    assert solution.order_report(ORDERS) == "orders: 4\ntotal: 461.75\nlarge: B2, D4"
    assert solution.order_report([]) == "orders: 0\ntotal: 0.00\nlarge: none"
    assert solution.order_report([{"id": "x", "amount": 5}]) == (
        "orders: 1\ntotal: 5.00\nlarge: none"
    )


def test_structure_helpers_exist() -> None:
    assert solution.order_total(ORDERS) == 461.75
    assert solution.order_total([]) == 0
    assert solution.large_order_ids(ORDERS) == ["B2", "D4"]
    assert solution.format_report(2, 3.5, ["Z"]) == "orders: 2\ntotal: 3.50\nlarge: Z"
    assert solution.format_report(0, 0.0, []) == "orders: 0\ntotal: 0.00\nlarge: none"


def test_structure_order_report_delegates() -> None:
    func = _function("order_report")
    assert {"order_total", "large_order_ids", "format_report"} <= _called_names(func)
    loops = (ast.For, ast.While, ast.comprehension)
    assert not any(isinstance(n, loops) for n in _body_nodes(func))
