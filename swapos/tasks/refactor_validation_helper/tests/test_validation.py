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
    user = solution.create_user(" Ada ", " Ada@Example.ORG ")
    assert user == {"name": "Ada", "email": "ada@example.org"}
    moved = solution.change_email(user, "ada@new.org")
    assert moved == {"name": "Ada", "email": "ada@new.org"}
    assert user["email"] == "ada@example.org"


def test_invalid_emails_still_rejected() -> None:
    for bad in ("nope", "@example.org", "ada@", "  "):
        with pytest.raises(ValueError):
            solution.create_user("x", bad)
        with pytest.raises(ValueError):
            solution.change_email({"name": "x", "email": "x@y"}, bad)


def test_structure_validate_email() -> None:
    assert solution.validate_email(" Bo@X.org ") == "bo@x.org"
    with pytest.raises(ValueError):
        solution.validate_email("bo.x.org")


def test_structure_callers_use_the_helper() -> None:
    for name in ("create_user", "change_email"):
        func = _function(name)
        assert "validate_email" in _called_names(func), f"{name}() does not call it"
        assert not any(isinstance(n, ast.Raise) for n in _body_nodes(func)), (
            f"{name}() still contains its own check"
        )
