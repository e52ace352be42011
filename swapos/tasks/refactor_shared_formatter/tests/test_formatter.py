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


def _calls(func: ast.FunctionDef, name: str) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
        for n in ast.walk(func)
    )


def test_behaviour_unchanged() -> None:
    assert solution.format_user(" ada lovelace ", "ADA@Example.org ") == (
        "Ada Lovelace <ada@example.org> [user]"
    )
    assert solution.format_admin("alan", "Alan@x.org") == "Alan <alan@x.org> [admin]"


def test_structure_has_format_person() -> None:
    assert solution.format_person("bo", "B@x", "guest") == "Bo <b@x> [guest]"


def test_structure_both_call_format_person() -> None:
    assert _calls(_function("format_user"), "format_person")
    assert _calls(_function("format_admin"), "format_person")
