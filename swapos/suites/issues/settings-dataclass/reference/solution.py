"""Application settings from environment variables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Settings:
    host: str = "localhost"
    port: int = 8080
    debug: bool = False
    retries: int = 3


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


def load_settings(env: Mapping[str, str]) -> Settings:
    """Settings from ``APP_HOST``, ``APP_PORT``, ``APP_DEBUG`` and ``APP_RETRIES``."""
    settings = Settings()
    if "APP_HOST" in env:
        settings = replace(settings, host=env["APP_HOST"].strip() or Settings.host)
    if "APP_PORT" in env:
        settings = replace(settings, port=_int("APP_PORT", env["APP_PORT"], 1, 65535))
    if "APP_DEBUG" in env:
        settings = replace(settings, debug=_bool("APP_DEBUG", env["APP_DEBUG"]))
    if "APP_RETRIES" in env:
        settings = replace(settings, retries=_int("APP_RETRIES", env["APP_RETRIES"], 0, 10))
    return settings


def server_url(settings: Settings) -> str:
    return f"http://{settings.host}:{settings.port}/"


def describe(settings: Settings) -> str:
    mode = "debug" if settings.debug else "production"
    return f"{server_url(settings)} ({mode}, {settings.retries} retries)"
