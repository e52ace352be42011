"""A minimal INI reader: sections of string key/value pairs."""

from __future__ import annotations

DEFAULT_SECTION = "DEFAULT"
COMMENT_PREFIXES = ("#", ";")


class IniError(ValueError):
    """A line that is neither a section, an assignment, a comment nor blank."""

    def __init__(self, lineno: int, line: str) -> None:
        super().__init__(f"line {lineno}: cannot parse {line!r}")
        self.lineno = lineno


def parse_ini(text: str) -> dict[str, dict[str, str]]:
    """Parse INI ``text`` into ``{section: {key: value}}``."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(COMMENT_PREFIXES):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1].strip(), {})
            continue
        if "=" not in line:
            raise IniError(lineno, raw)
        key, value = line.split("=", 1)
        if current is not None:
            current[key.strip()] = value.strip()
    return sections


def get_int(config: dict[str, dict[str, str]], section: str, key: str, default: int) -> int:
    """``config[section][key]`` as an int, falling back to the DEFAULT section, then
    ``default``."""
    value = config.get(section, {}).get(key)
    if value is None:
        value = config.get(DEFAULT_SECTION, {}).get(key)
    return default if value is None else int(value)
