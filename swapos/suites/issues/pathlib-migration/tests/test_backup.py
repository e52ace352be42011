import ast
from pathlib import Path

import pytest

import solution


def test_behaviour_numbered_backups_and_pruning(tmp_path):
    src = tmp_path / "notes.txt"
    for i in range(1, 6):
        src.write_text(f"v{i}", encoding="utf-8")
        made = solution.backup_file(str(src), keep=3)
        assert Path(made).name == f"notes.{i}.bak.txt"
    names = [Path(p).name for p in solution.list_backups(str(src))]
    assert names == ["notes.3.bak.txt", "notes.4.bak.txt", "notes.5.bak.txt"]
    assert solution.read_backup(str(src), 4) == "v4"


def test_behaviour_no_suffix_and_ordering(tmp_path):
    src = tmp_path / "Makefile"
    src.write_text("x", encoding="utf-8")
    for _ in range(11):
        solution.backup_file(src, keep=20)
    names = [Path(p).name for p in solution.list_backups(src)]
    assert names[0] == "Makefile.1.bak" and names[-1] == "Makefile.11.bak"
    assert len(names) == 11


def test_behaviour_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        solution.backup_file(tmp_path / "nope.txt")
    assert solution.list_backups(tmp_path / "nope.txt") == []


def test_structure_returns_paths_and_accepts_pathlike(tmp_path):
    src = tmp_path / "a.cfg"
    src.write_text("1", encoding="utf-8")
    made = solution.backup_file(src)
    assert isinstance(made, Path)
    assert isinstance(solution.backup_name(str(src), 2), Path)
    assert all(isinstance(p, Path) for p in solution.list_backups(src))
    assert made == tmp_path / ".backups" / "a.1.bak.cfg"


def test_structure_no_os_path_or_string_file_calls():
    tree = ast.parse(Path(solution.__file__).read_text())
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "os" and node.attr in {"path", "listdir", "makedirs", "remove"}:
                bad.append(f"os.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module in {"os", "os.path"}:
            bad.append(f"from {node.module} import")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "open":
                bad.append("open()")
    assert not bad, bad
