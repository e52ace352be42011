"""The base of every message: a frozen, keyword-only, tagged msgspec Struct."""

from __future__ import annotations

import itertools
from typing import Literal

import msgspec

Address = Literal[
    "client", "router", "loader", "evictor", "prefetcher", "generator", "kvcache", "recorder"
]
"""Where a reply goes: every actor, plus the client side of the system handle."""


class Message(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag=True):
    """Base of all messages. The ``type`` tag is the class name."""


class Request(Message, frozen=True, kw_only=True):
    """A command that expects a reply, correlated by ``request_id``."""

    request_id: str
    reply_to: Address


class Reply(Message, frozen=True, kw_only=True):
    """A reply to a :class:`Request`."""

    request_id: str


_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    """A process-unique id such as ``"gen-42"``."""
    return f"{prefix}-{next(_ids)}"
