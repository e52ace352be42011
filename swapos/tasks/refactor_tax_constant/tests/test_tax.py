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
    assert solution.tax(10.0) == 2.0
    assert solution.tax(9.99) == 2.0
    assert solution.price_with_tax(10.0) == 12.0
    assert solution.price_with_tax(0.0) == 0.0


def test_structure_defines_tax_rate_constant() -> None:
    assert solution.TAX_RATE == 0.2


def test_structure_no_float_literals_in_functions() -> None:
    for name in ("tax", "price_with_tax"):
        floats = [
            n.value
            for n in ast.walk(_function(name))
            if isinstance(n, ast.Constant) and isinstance(n.value, float)
        ]
        assert floats == [], f"{name}() still contains {floats}"
