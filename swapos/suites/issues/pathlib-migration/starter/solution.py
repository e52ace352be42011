"""Keep numbered backups of a file in a sibling ``.backups`` folder."""

from __future__ import annotations

import os
import shutil

BACKUP_DIR = ".backups"


def backup_dir(path: str) -> str:
    """The backup folder that belongs to ``path``."""
    return os.path.join(os.path.dirname(os.path.abspath(path)), BACKUP_DIR)


def backup_name(path: str, number: int) -> str:
    """``<backup dir>/<stem>.<number>.bak<suffix>``, e.g. ``notes.3.bak.txt``."""
    stem, suffix = os.path.splitext(os.path.basename(path))
    return os.path.join(backup_dir(path), f"{stem}.{number}.bak{suffix}")


def list_backups(path: str) -> list[str]:
    """The backups of ``path``, oldest (lowest number) first."""
    folder = backup_dir(path)
    if not os.path.isdir(folder):
        return []
    stem, suffix = os.path.splitext(os.path.basename(path))
    found = []
    for name in os.listdir(folder):
        prefix, end = f"{stem}.", f".bak{suffix}"
        middle = name[len(prefix) : len(name) - len(end)]
        if name.startswith(prefix) and name.endswith(end) and middle.isdigit():
            found.append((int(middle), os.path.join(folder, name)))
    return [p for _, p in sorted(found)]


def backup_file(path: str, keep: int = 3) -> str:
    """Copy ``path`` to its next numbered backup, keep only the newest ``keep`` backups,
    and return the new backup's path."""
    if not os.path.isfile(path):
        raise FileNotFoundError(path)
    os.makedirs(backup_dir(path), exist_ok=True)
    existing = list_backups(path)
    number = 1
    if existing:
        last = os.path.basename(existing[-1])
        number = int(last.split(".")[-3 if os.path.splitext(path)[1] else -2]) + 1
    target = backup_name(path, number)
    shutil.copyfile(path, target)
    for old in list_backups(path)[:-keep]:
        os.remove(old)
    return target


def read_backup(path: str, number: int) -> str:
    with open(backup_name(path, number), encoding="utf-8") as f:
        return f.read()
