"""The layering rules of docs/architecture.md, checked on the import graph.

A package may import its own modules and packages on floors strictly below its own; the top
floor (the applications) may import anything. And no two modules import each other, directly
or through others, anywhere (the top floor included). Imports inside functions and under
``if TYPE_CHECKING:`` count too: a lazy import is still a dependency, and a circle hidden
behind one is still a circle (move what both sides need to a lower module).
"""

from __future__ import annotations

import ast
from pathlib import Path

import swapos

FLOORS: tuple[frozenset[str], ...] = (
    # 0: plain data and leaf utilities: they import nothing of SwapOS's upper floors
    frozenset(
        {
            "data",
            "errors",
            "clock",
            "version",
            "openmp",
            "sysinfo",
            "logconfig",
            "cliargs",
            "tempdirs",
            "regular_files",
        }
    ),
    # 1: pure decisions, model files and profiles, capsules, the message vocabulary, and the
    # sandboxed grader (usable alone: it imports the bottom floor only, see below)
    frozenset({"policies", "models", "capsule", "messages", "structured", "grader"}),
    # 2: what the actors use: model backends, KV stores, the pipeline's core, records
    frozenset({"backends", "kvstore", "pipeline", "records"}),
    # 3: the passes a profile names: heuristics over briefs and answers, on top of the core
    frozenset({"passes"}),
    # 4: the actor system and its test clock
    frozenset({"actors", "testing"}),
    # 5: applications: CLIs, benchmarks, the cluster driver, the server, the console, the API
    frozenset({"bench", "cluster", "serve", "run", "cli", "console", "__init__", "__main__"}),
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
    assert violations({"grader": {"pipeline", "data"}}) == [
        "swapos.grader (floor 1) imports swapos.pipeline (2)"
    ]
    assert violations({"pipeline": {"passes"}}) == [
        "swapos.pipeline (floor 2) imports swapos.passes (3)"
    ]


def test_every_package_has_a_floor() -> None:
    for package in package_edges():
        floor_of(package)


# --- the grader stands alone ------------------------------------------------------------


def reached_outside(edges: dict[str, set[str]], package: str, allowed: frozenset[str]) -> list[str]:
    """The modules of ``swapos`` outside ``package`` and the ``allowed`` top-level packages
    that ``package``'s modules import, directly or through the modules they import."""
    inside = f"swapos.{package}"
    todo = [m for m in edges if m == inside or m.startswith(inside + ".")]
    seen = set(todo)
    while todo:
        for target in edges.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    top = {m: m.split(".")[1] if "." in m else "__init__" for m in seen}
    return sorted(m for m in seen if top[m] != package and top[m] not in allowed)


def test_the_grader_imports_nothing_of_the_pipeline() -> None:
    """``swapos.grader`` is usable alone (``from swapos.grader import grade``): it reaches,
    through any chain of imports, only its own modules and the bottom floor; never
    ``swapos.pipeline``, nor actors, backends or benchmarks."""
    assert "pipeline" not in package_edges()["grader"]
    assert reached_outside(module_edges(ROOT, "swapos"), "grader", FLOORS[0]) == []


def test_the_grader_check_catches_an_import_through_another_module() -> None:
    edges = {
        "swapos.grader.grading": {"swapos.grader.verdict", "swapos.tempdirs"},
        "swapos.grader.verdict": {"swapos.data.task"},
        "swapos.data.task": {"swapos.pipeline.tasks"},  # fabricated: the bottom floor reaching up
        "swapos.pipeline.tasks": {"swapos.capsule.schema"},
        "swapos.pipeline.steps": {"swapos.grader.grading"},  # importing the grader is fine
    }
    assert reached_outside(edges, "grader", FLOORS[0]) == [
        "swapos.capsule.schema",
        "swapos.pipeline.tasks",
    ]
    del edges["swapos.data.task"]
    assert reached_outside(edges, "grader", FLOORS[0]) == []


def test_the_passes_import_the_core_and_the_core_never_a_pass() -> None:
    edges = module_edges(ROOT, "swapos")
    core = {m: targets for m, targets in edges.items() if m.startswith("swapos.pipeline")}
    assert core and not [(m, t) for m, ts in core.items() for t in ts if "swapos.passes" in t]
    passes = {t for m, ts in edges.items() if m.startswith("swapos.passes") for t in ts}
    assert any(t.startswith("swapos.pipeline") for t in passes)


# --- no import cycle between modules ------------------------------------------------------

CYCLES_ALLOWED: frozenset[frozenset[str]] = frozenset()
"""Import cycles known and being removed elsewhere; every entry must still exist."""


def module_paths(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package at ``root`` (named ``package``) by its dotted name; a
    package is its ``__init__.py``. Data folders (:data:`DATA_ONLY`) are left out."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("").parts
        if rel[0] in DATA_ONLY:
            continue
        parts = rel[:-1] if rel[-1] == "__init__" else rel
        found[".".join((package, *parts))] = path
    return found


def imported_modules(node: ast.AST, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` an import statement ``node`` in ``module`` names, relative
    imports made absolute: ``import a.b`` gives ``a.b`` (or ``a`` when ``a.b`` is no
    module), ``from a import b`` gives ``a.b`` if that is a module, else ``a`` (a name from
    its ``__init__``)."""
    found: set[str] = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            name = alias.name
            while name not in known and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in known:
                found.add(name)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            here = module.split(".") if is_package else module.split(".")[:-1]
            anchor = here[: len(here) - (node.level - 1)]
            base = ".".join([*anchor, *([base] if base else [])])
        for alias in node.names:
            if f"{base}.{alias.name}" in known:
                found.add(f"{base}.{alias.name}")
            elif base in known:
                found.add(base)
    return found


def module_edges(root: Path, package: str) -> dict[str, set[str]]:
    """``module -> the modules of the package it imports``, from every import statement
    (at module level, in functions, under ``TYPE_CHECKING``). An import names the module it
    binds; the ``__init__`` of the packages above that module, which Python also runs, is
    not counted (the public API's ``__init__`` imports its own modules, so every module
    would be in a cycle with it)."""
    paths = module_paths(root, package)
    known = set(paths)
    edges: dict[str, set[str]] = {}
    for module, path in paths.items():
        is_package = path.name == "__init__.py"
        targets = edges.setdefault(module, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets |= imported_modules(node, module, is_package, known)
        targets.discard(module)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``edges``: each strongly connected set of two or more modules,
    sorted (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(edges.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_cycle_between_modules() -> None:
    found = {frozenset(c) for c in cycles(module_edges(ROOT, "swapos"))}
    assert sorted(sorted(c) for c in found - CYCLES_ALLOWED) == []
    gone = CYCLES_ALLOWED - found
    assert not gone, f"no longer a cycle: take {sorted(map(sorted, gone))} off CYCLES_ALLOWED"


def test_the_cycle_check_catches_module_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from pkg.sub import low as low\n",
        "a.py": "from pkg import b\n",
        "b.py": "def f() -> None:\n    from . import a  # lazy\n",
        "c.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.d import D\n"
        ),
        "sub/__init__.py": "",
        "sub/d.py": "import pkg.c\n",
        "sub/low.py": "import os\n",
        "e.py": "from .sub import low\nfrom .sub.low import os\n",  # no cycle: imports down
    }
    for name, text in files.items():
        (pkg / name).write_text(text, encoding="utf-8")
    edges = module_edges(pkg, "pkg")
    assert edges["pkg.e"] == {"pkg.sub.low"}
    assert edges["pkg.b"] == {"pkg.a"}
    assert cycles(edges) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.sub.d"]]


def test_the_cycle_check_finds_a_long_circle_and_no_false_one() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d", "a"}}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


# --- modules stay small ---------------------------------------------------------------------

MAX_LINES = 400
LONG_MODULES_ALLOWED: dict[str, str] = {
    "actors/system.py": "the wiring tables (inbox sizes, edges, modes) beside open_system",
    "grader/_sandbox.py": "a stdlib-only script run by path under -I: it cannot import a sibling",
    "models/bundled.py": "the pinned table of the bundled models' chunks and their assembly",
    "passes/brief_examples.py": "the tables of brief forms (regexes) and their readers",
}
"""Modules over :data:`MAX_LINES` today, each with why; the list may only shrink."""


def long_modules(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """Every module under ``root`` (data folders, :data:`DATA_ONLY`, left out) with more than
    ``limit`` lines, by its path relative to ``root``."""
    found: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in DATA_ONLY:
            continue
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found[rel.as_posix()] = lines
    return found


def test_no_module_is_over_400_lines_but_the_listed_ones() -> None:
    found = long_modules(ROOT)
    new = {path: n for path, n in found.items() if path not in LONG_MODULES_ALLOWED}
    assert new == {}, f"split these modules (over {MAX_LINES} lines): {new}"
    gone = sorted(set(LONG_MODULES_ALLOWED) - set(found))
    assert not gone, f"no longer over {MAX_LINES} lines: take {gone} off LONG_MODULES_ALLOWED"


def test_the_size_check_catches_a_long_module(tmp_path: Path) -> None:
    files = {"a.py": 401, "sub/b.py": 402, "c.py": 400, "tasks/t/solution.py": 900}
    for name, lines in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n" * lines, encoding="utf-8")
    assert long_modules(tmp_path) == {"a.py": 401, "sub/b.py": 402}
