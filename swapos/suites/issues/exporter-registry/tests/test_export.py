import ast
from pathlib import Path

import pytest

import solution

ROWS = [{"id": 1, "name": "Ada"}, {"id": 2, "city": "Paris"}]


def test_behaviour_csv():
    assert solution.export(ROWS, "CSV") == "id,name,city\n1,Ada,\n2,,Paris\n"


def test_behaviour_json():
    out = solution.export(ROWS[:1], "json")
    assert out == '[\n  {\n    "id": 1,\n    "name": "Ada"\n  }\n]\n'


def test_behaviour_markdown():
    assert solution.export(ROWS, "markdown") == (
        "| id | name | city |\n|---|---|---|\n| 1 | Ada |  |\n| 2 |  | Paris |\n"
    )


def test_behaviour_unknown_format():
    with pytest.raises(ValueError, match="unknown format 'xml'; choose from csv, json, markdown"):
        solution.export(ROWS, "xml")


def test_structure_registry():
    assert set(solution.EXPORTERS) == {"csv", "json", "markdown"}
    assert solution.EXPORTERS["csv"] is solution.export_csv
    assert solution.EXPORTERS["json"] is solution.export_json
    assert solution.EXPORTERS["markdown"] is solution.export_markdown
    assert solution.supported_formats() == list(solution.EXPORTERS)
    solution.EXPORTERS["upper"] = lambda rows: "X"
    try:
        assert solution.export(ROWS, "upper") == "X"
        assert "upper" in solution.supported_formats()
    finally:
        del solution.EXPORTERS["upper"]


def test_structure_no_branching_on_the_format():
    tree = ast.parse(Path(solution.__file__).read_text())
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "export")
    nodes = [n for stmt in func.body for n in ast.walk(stmt)]
    assert not any(isinstance(n, (ast.If, ast.IfExp, ast.Match)) for n in nodes)
