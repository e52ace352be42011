"""Dotted-path access into nested JSON-like data."""

from __future__ import annotations

from typing import Any

SEP = "."


def get_path(data: Any, path: str, default: Any = None) -> Any:
    """The value at dotted ``path`` in nested dicts (and lists, by index), or ``default``
    when some step of the path does not exist."""
    current = data
    for step in path.split(SEP):
        if isinstance(current, dict):
            if step not in current:
                return default
            current = current[step]
        elif isinstance(current, list) and step.lstrip("-").isdigit():
            index = int(step)
            if not -len(current) <= index < len(current):
                return default
            current = current[index]
        else:
            return default
    return current


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set ``value`` at dotted ``path``, creating dicts along the way."""
    *parents, last = path.split(SEP)
    current = data
    for step in parents:
        current = current.setdefault(step, {})
    current[last] = value


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists are leaves)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        full = f"{prefix}{SEP}{key}" if prefix else key
        if isinstance(value, dict) and value:
            out.update(flatten(value, full))
        else:
            out[full] = value
    return out
