"""The layering rule of docs/architecture.md, checked on the import graph.

A package may import its own modules and packages on floors strictly below its own; the top
floor (the applications) may import anything. Imports inside functions count too: a lazy
import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import swapos

FLOORS: tuple[frozenset[str], ...] = (
    # 0: plain data and leaf utilities: they import nothing of SwapOS's upper floors
    frozenset({"data", "errors", "clock", "version", "openmp", "sysinfo", "logconfig", "cliargs"}),
    # 1: pure decisions, model files and profiles, capsules, the message vocabulary
    frozenset({"policies", "models", "capsule", "messages"}),
    # 2: what the actors use: model backends, KV stores, the pipeline's logic, records
    frozenset({"backends", "kvstore", "pipeline", "records"}),
    # 3: the actor system and its test clock
    frozenset({"actors", "testing"}),
    # 4: applications: CLIs, benchmarks, the cluster driver, the server, the console, the API
    frozenset({"bench", "cluster", "serve", "run", "console", "__init__", "__main__"}),
)
TOP = len(FLOORS) - 1
ROOT = Path(swapos.__file__).parent
DATA_ONLY = frozenset({"tasks", "suites"})
"""Folders of data, not code: the shipped suites (their sources are candidates' starting code)."""


def floor_of(package: str) -> int:
    for i, names in enumerate(FLOORS):
        if package in names:
            return i
    raise AssertionError(f"swapos.{package} has no floor: add it to FLOORS in {__file__}")


def imports(path: Path) -> set[str]:
    """The top-level swapos packages ``path`` imports (``swapos.x.y`` -> ``x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "swapos":
                found.add(parts[1] if len(parts) > 1 else "__init__")
    return found


def violations(edges: dict[str, set[str]]) -> list[str]:
    """Every import of a package from one on the same or a higher floor (apps excepted)."""
    bad = []
    for src, targets in sorted(edges.items()):
        mine = floor_of(src)
        for target in sorted(targets - {src}):
            if mine != TOP and floor_of(target) >= mine:
                bad.append(
                    f"swapos.{src} (floor {mine}) imports swapos.{target} ({floor_of(target)})"
                )
    return bad


def package_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("").parts
        if rel[0] in DATA_ONLY:
            continue
        edges.setdefault(rel[0], set()).update(imports(path))
    return edges


def test_no_package_imports_upwards() -> None:
    assert violations(package_edges()) == []


def test_the_check_catches_an_upward_import() -> None:
    assert violations({"messages": {"backends"}, "data": {"pipeline"}}) == [
        "swapos.data (floor 0) imports swapos.pipeline (2)",
        "swapos.messages (floor 1) imports swapos.backends (2)",
    ]
    assert violations({"bench": {"cluster", "actors"}}) == []


def test_every_package_has_a_floor() -> None:
    for package in package_edges():
        floor_of(package)
