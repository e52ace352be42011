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


def test_calls_without_list_are_independent() -> None:
    first = solution.add_tag("a")
    second = solution.add_tag("b")
    assert first == ["a"]
    assert second == ["b"]
    assert first is not second


def test_given_list_is_appended_in_place() -> None:
    tags = ["x"]
    result = solution.add_tag("y", tags)
    assert result is tags
    assert tags == ["x", "y"]


def test_structure_default_is_none() -> None:
    func = _function("add_tag")
    defaults = func.args.defaults + [d for d in func.args.kw_defaults if d is not None]
    assert defaults, "add_tag should keep an optional tags argument"
    for default in defaults:
        assert isinstance(default, ast.Constant) and default.value is None, (
            f"default on line {default.lineno} is not None"
        )
