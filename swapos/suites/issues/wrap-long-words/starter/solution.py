"""Tiny text formatting helpers (a subset of textwrap, with simpler rules)."""

from __future__ import annotations


def wrap(text: str, width: int = 70) -> list[str]:
    """Greedily pack the words of ``text`` into lines of at most ``width`` characters.

    Words are never split; a word longer than ``width`` gets a line of its own.
    """
    if width < 1:
        raise ValueError("width must be >= 1")
    lines: list[str] = []
    current = ""
    for word in text.split():
        if len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    lines.append(current)
    return lines


def fill(text: str, width: int = 70) -> str:
    """``wrap`` joined with newlines."""
    return "\n".join(wrap(text, width))


def indent_block(text: str, prefix: str = "    ", width: int = 70) -> str:
    """Wrap ``text`` so that every line, prefix included, fits in ``width``."""
    inner = max(1, width - len(prefix))
    return "\n".join(prefix + line for line in wrap(text, inner))


def shorten(text: str, width: int, placeholder: str = " [...]") -> str:
    """Collapse whitespace and cut ``text`` at a word boundary to fit ``width``."""
    words = text.split()
    joined = " ".join(words)
    if len(joined) <= width:
        return joined
    out = ""
    for word in words:
        candidate = f"{out} {word}" if out else word
        if len(candidate) + len(placeholder) > width:
            break
        out = candidate
    return out + placeholder
