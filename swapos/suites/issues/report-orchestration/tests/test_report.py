import ast
from pathlib import Path

import solution

LOG = """\
/api 200 0.120
/api 503 1.500
/home 200 0.010
garbage line here too
/api 200 abc
/login 500 0.300
/home 304 0.002
"""


def test_behaviour_report_text():
    assert solution.build_report(LOG) == (
        "requests: 5\n"
        "errors: 2\n"
        "slowest: /api (1.500s)\n"
        "  /api: 2\n"
        "  /home: 2\n"
        "  /login: 1"
    )


def test_behaviour_empty_log():
    assert solution.build_report("") == "requests: 0\nerrors: 0\nslowest: -"


def test_structure_steps_exist():
    entries = solution.parse_lines("/a 200 0.5\nbad\n/b 500 1\n")
    assert entries == [("/a", 200, 0.5), ("/b", 500, 1.0)]
    summary = solution.summarise(entries)
    assert summary == {
        "requests": 2,
        "errors": 1,
        "slowest": ("/b", 1.0),
        "per_path": {"/a": 1, "/b": 1},
    }
    assert solution.render(summary).startswith("requests: 2\nerrors: 1\nslowest: /b (1.000s)")


def test_structure_build_report_is_pure_orchestration():
    tree = ast.parse(Path(solution.__file__).read_text())
    func = next(
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "build_report"
    )
    nodes = [n for stmt in func.body for n in ast.walk(stmt)]
    banned = (ast.For, ast.While, ast.comprehension, ast.If, ast.IfExp, ast.Try)
    assert not [type(n).__name__ for n in nodes if isinstance(n, banned)]
    called = {n.func.id for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert {"parse_lines", "summarise", "render"} <= called
