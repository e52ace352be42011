"""URL helpers for the API client."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def base_url(url: str) -> str:
    """``url`` without its query and fragment."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def query_params(url: str) -> dict[str, str]:
    """The query parameters of ``url`` (the last value of a repeated one wins)."""
    return dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))


def strip_default_port(url: str) -> str:
    """``url`` without ``:80`` for http or ``:443`` for https."""
    parts = urlsplit(url)
    if parts.port is not None and DEFAULT_PORTS.get(parts.scheme) == parts.port:
        host = parts.hostname or ""
        netloc = host if not parts.username else f"{parts.username}@{host}"
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts)


def join_path(base: str, *segments: str) -> str:
    """``base`` with ``segments`` appended as path segments, one slash between each."""
    out = base.rstrip("/")
    for seg in segments:
        out += "/" + seg.strip("/")
    return out


def with_query(url: str, **params: Any) -> str:
    """``url`` with ``params`` set in its query (``None`` removes a parameter)."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    merged: dict[str, str] = {}
    for key, value in pairs:
        merged[key] = value
    for key, value in params.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = str(value)
    return urlunsplit(parts._replace(query=urlencode(merged)))
