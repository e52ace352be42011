"""What of the host the grader's sandbox keeps (docs/grader.md): the system directories, the
Python installation, the package directories it empties, pytest's own packages it binds back
into them (wherever they are installed: :func:`placements`), and the run's environment. Read
once per process (the installation does not move).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import os
import site
import sys
from pathlib import Path

SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin")
"""The host's system directories, bound read-only at their own paths."""
SYSTEM_FILES = ("/etc/ld.so.cache",)
"""Single host files the sandbox needs (the dynamic linker's cache)."""


@functools.cache
def installation() -> list[str]:
    """The Python installation's directories (a venv's and its base's), real paths."""
    paths = {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent.parent)}
    return sorted({os.path.realpath(p) for p in paths if os.path.isdir(p)})


@functools.cache
def site_dirs() -> list[str]:
    """Every package directory the interpreter may import from, and every one inside the
    installation the sandbox keeps (a venv's base has its own ``site-packages``, which the
    venv's ``site.getsitepackages()`` does not list): all emptied in the sandbox."""
    dirs = set(site.getsitepackages()) | {p for p in sys.path if p.endswith("-packages")}
    for root in installation():
        for pattern in ("lib*/python*/*-packages", "local/lib*/python*/*-packages"):
            dirs.update(str(p) for p in Path(root).glob(pattern))
    return sorted({os.path.realpath(d) for d in dirs if os.path.isdir(d)})


@functools.cache
def pytest_packages() -> list[tuple[str, str]]:
    """pytest and its dependencies as the sandbox binds them: ``(real path, path in the
    sandbox)`` of each top-level file and directory (with their metadata), all of
    ``site-packages`` the sandbox keeps; see :func:`placements`."""
    return placements(pytest_paths(), isolated_site_dirs())


def pytest_paths() -> list[str]:
    """The top-level files and directories of pytest and its dependencies (with their
    metadata), real paths, wherever this interpreter finds them."""
    paths: set[str] = set()
    for dist in closure("pytest"):
        for file in dist.files or ():
            top = file.parts[0] if file.parts else ""
            if top and top not in ("..", "__pycache__") and not top.endswith(".pth"):
                paths.add(os.path.realpath(str(dist.locate_file(top))))
    return sorted(paths)


def isolated_site_dirs() -> list[str]:
    """The package directories this interpreter reads under ``-I`` (as the runner runs), in
    its order, real paths: a venv's own (and its base's, with system site packages); never
    the user's, nor ``.pth`` or ``PYTHONPATH`` entries."""
    found = (os.path.realpath(d) for d in site.getsitepackages() if os.path.isdir(d))
    return list(dict.fromkeys(found))


def placements(paths: list[str], homes: list[str]) -> list[tuple[str, str]]:
    """Where the sandbox binds each of ``paths`` (pytest's packages, real paths): at its own
    path when it lies in one of ``homes`` (the package directories the sandboxed interpreter
    reads under ``-I``), else into the first home, where ``python -I`` finds it all the same
    (a ``--user`` install, or pytest reached through a ``.pth`` or ``PYTHONPATH`` entry). One
    package per place: one at home wins over one brought in. Without a home, own paths."""
    at_home = [p for p in paths if os.path.dirname(p) in homes or not homes]
    brought = [(p, os.path.join(homes[0], os.path.basename(p))) for p in paths if p not in at_home]
    placed: dict[str, str] = {p: p for p in at_home}
    for src, dst in brought:
        placed.setdefault(dst, src)
    return sorted((src, dst) for dst, src in placed.items())


def closure(name: str) -> list[importlib.metadata.Distribution]:
    """The installed distribution ``name`` and, recursively, those it requires here (extras
    left out; environment markers evaluated for this interpreter)."""
    from packaging.requirements import InvalidRequirement, Requirement

    found: dict[str, importlib.metadata.Distribution] = {}
    todo = [name]
    while todo:
        key = todo.pop().lower().replace("_", "-")
        if key in found:
            continue
        try:
            dist = importlib.metadata.distribution(key)
        except importlib.metadata.PackageNotFoundError:
            continue
        found[key] = dist
        for line in dist.requires or ():
            with contextlib.suppress(InvalidRequirement):
                req = Requirement(line)
                if req.marker is None or req.marker.evaluate({"extra": ""}):
                    todo.append(req.name)
    return list(found.values())


def environment() -> dict[str, str]:
    """The run's whole environment (the launcher adds ``HOME`` and ``TMPDIR``)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "USER": "sandbox",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONHASHSEED": "0",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
