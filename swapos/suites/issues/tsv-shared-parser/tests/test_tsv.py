import ast
from pathlib import Path

import pytest

import solution

USERS = "# id\tname\temail\n1\tAda\tada@example.org\n\n2\t Bob \t\\N\n"
ORDERS = "10\t1\t9.5\tfirst\n11\t2\t3\t\\N\n# trailer\n12\t1\t0.5\tx\n"


def test_behaviour_loaders():
    assert solution.load_users(USERS) == [
        {"id": 1, "name": "Ada", "email": "ada@example.org"},
        {"id": 2, "name": "Bob", "email": None},
    ]
    orders = solution.load_orders(ORDERS)
    assert orders[1] == {"id": 11, "user_id": 2, "amount": 3.0, "note": None}
    assert solution.totals_by_user(orders) == {1: 10.0, 2: 3.0}


def test_behaviour_bad_lines_name_their_line():
    with pytest.raises(ValueError, match="line 2"):
        solution.load_users("1\ta\tb\n2\tonly two\n")
    with pytest.raises(ValueError, match="4"):
        solution.load_orders("1\t2\t3\n")


def test_structure_parse_record():
    assert solution.parse_record("a\t \\N \t c ", 3) == ["a", None, "c"]
    assert solution.parse_record("   ", 3) is None
    assert solution.parse_record("# x\ty", 2) is None
    with pytest.raises(ValueError, match="3"):
        solution.parse_record("a\tb", 3)


def _functions_splitting_on_tab():
    tree = ast.parse(Path(solution.__file__).read_text())
    found = set()
    for func in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        for node in (n for stmt in func.body for n in ast.walk(stmt)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "split"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value == "\t"
            ):
                found.add(func.name)
    return found


def test_structure_tab_splitting_only_in_parse_record():
    assert _functions_splitting_on_tab() == {"parse_record"}


def test_structure_loaders_call_parse_record():
    source = Path(solution.__file__).read_text()
    tree = ast.parse(source)
    callers = {
        func.name
        for func in ast.walk(tree)
        if isinstance(func, ast.FunctionDef)
        for node in ast.walk(func)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "parse_record"
    }
    loaders = {"load_users", "load_orders"}
    # directly, or through one shared helper that both call
    helpers = callers - loaders
    for name in loaders:
        func = next(
            f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == name
        )
        called = {
            n.func.id
            for n in ast.walk(func)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        assert name in callers or called & helpers, f"{name} does not use parse_record"
