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

import dataclasses


def test_parse_point_returns_point() -> None:
    p = solution.parse_point(" 3, 4 ")
    assert p == solution.Point(3.0, 4.0)
    assert (p.x, p.y) == (3.0, 4.0)
    assert solution.parse_point("-1.5,0") == solution.Point(-1.5, 0.0)


def test_distance_of_points() -> None:
    Point = solution.Point
    assert solution.distance(Point(0.0, 0.0), Point(3.0, 4.0)) == 5.0
    assert solution.distance(solution.parse_point("1,1"), Point(1.0, 1.0)) == 0.0


def test_structure_point_is_a_dataclass() -> None:
    assert dataclasses.is_dataclass(solution.Point)
    assert [f.name for f in dataclasses.fields(solution.Point)] == ["x", "y"]


def test_structure_distance_does_not_index() -> None:
    func = _function("distance")
    assert not any(isinstance(n, ast.Subscript) for n in _body_nodes(func))
    attrs = {n.attr for n in _body_nodes(func) if isinstance(n, ast.Attribute)}
    assert {"x", "y"} <= attrs
