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


def test_behaviour_unchanged() -> None:
    assert [solution.ticket_price(a) for a in (0, 3, 4, 17, 18, 64, 65, 90)] == [
        0,
        0,
        5,
        5,
        10,
        10,
        6,
        6,
    ]


def test_structure_no_if_nested_in_if_body() -> None:
    for node in ast.walk(_function("ticket_price")):
        if isinstance(node, ast.If):
            for inner in node.body:
                assert not any(isinstance(n, ast.If) for n in ast.walk(inner)), (
                    f"an if is nested in the body of the if on line {node.lineno}"
                )
