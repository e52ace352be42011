"""Keep numbered backups of a file in a sibling ``.backups`` folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

BACKUP_DIR = ".backups"

StrPath = str | os.PathLike[str]


def backup_dir(path: StrPath) -> Path:
    """The backup folder that belongs to ``path``."""
    return Path(path).absolute().parent / BACKUP_DIR


def backup_name(path: StrPath, number: int) -> Path:
    """``<backup dir>/<stem>.<number>.bak<suffix>``, e.g. ``notes.3.bak.txt``."""
    p = Path(path)
    return backup_dir(p) / f"{p.stem}.{number}.bak{p.suffix}"


def _number(path: Path, name: str) -> int | None:
    prefix, end = f"{path.stem}.", f".bak{path.suffix}"
    middle = name[len(prefix) : len(name) - len(end)]
    if name.startswith(prefix) and name.endswith(end) and middle.isdigit():
        return int(middle)
    return None


def list_backups(path: StrPath) -> list[Path]:
    """The backups of ``path``, oldest (lowest number) first."""
    p = Path(path)
    folder = backup_dir(p)
    if not folder.is_dir():
        return []
    found = []
    for child in folder.iterdir():
        n = _number(p, child.name)
        if n is not None:
            found.append((n, child))
    return [c for _, c in sorted(found)]


def backup_file(path: StrPath, keep: int = 3) -> Path:
    """Copy ``path`` to its next numbered backup, keep only the newest ``keep`` backups,
    and return the new backup's path."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(str(path))
    backup_dir(p).mkdir(parents=True, exist_ok=True)
    existing = list_backups(p)
    number = (_number(p, existing[-1].name) or 0) + 1 if existing else 1
    target = backup_name(p, number)
    shutil.copyfile(p, target)
    for old in list_backups(p)[:-keep]:
        old.unlink()
    return target


def read_backup(path: StrPath, number: int) -> str:
    return backup_name(path, number).read_text(encoding="utf-8")
