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


def _called_names(func: ast.FunctionDef) -> set[str]:
    return {
        n.func.id
        for n in ast.walk(func)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }


def test_behaviour_unchanged() -> None:
    assert solution.first_negative([3, -1, -2]) == 1
    assert solution.first_negative([1, 2]) == -1
    assert solution.first_negative([]) == -1


def test_structure_uses_enumerate() -> None:
    assert "enumerate" in _called_names(_function("first_negative"))


def test_structure_no_range_len() -> None:
    called = _called_names(_function("first_negative"))
    assert "range" not in called
    assert "len" not in called
