"""Application settings from environment variables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULTS: dict[str, Any] = {"host": "localhost", "port": 8080, "debug": False, "retries": 3}
TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off"}


def _bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ValueError(f"{name}: expected a boolean, got {raw!r}")


def _int(name: str, raw: str, low: int, high: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}: expected an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise ValueError(f"{name}: {value} is outside {low}..{high}")
    return value


def load_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """Settings from ``APP_HOST``, ``APP_PORT``, ``APP_DEBUG`` and ``APP_RETRIES``."""
    settings = dict(DEFAULTS)
    if "APP_HOST" in env:
        settings["host"] = env["APP_HOST"].strip() or DEFAULTS["host"]
    if "APP_PORT" in env:
        settings["port"] = _int("APP_PORT", env["APP_PORT"], 1, 65535)
    if "APP_DEBUG" in env:
        settings["debug"] = _bool("APP_DEBUG", env["APP_DEBUG"])
    if "APP_RETRIES" in env:
        settings["retries"] = _int("APP_RETRIES", env["APP_RETRIES"], 0, 10)
    return settings


def server_url(settings: dict[str, Any]) -> str:
    return f"http://{settings['host']}:{settings['port']}/"


def describe(settings: dict[str, Any]) -> str:
    mode = "debug" if settings["debug"] else "production"
    return f"{server_url(settings)} ({mode}, {settings['retries']} retries)"
