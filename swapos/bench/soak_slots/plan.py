"""What each request of the slot soak does: its prompt, its id, and whether its client reads
it to the end, disconnects mid-stream or cancels it before reading anything.

Pure and seeded: client ``c`` draws its requests' actions from ``random.Random`` seeded by
``(seed, c)``, so one seed gives every client the same sequence of actions (which request
each lands on depends on timing).
"""

from __future__ import annotations

import random
from typing import Literal

import msgspec

from swapos.bench.slots.command import TOPICS

Kind = Literal["complete", "disconnect", "cancel"]
CANCEL_WITHIN_S = 0.05
"""A cancelled request is closed this long after it is sent, at most (uniformly drawn)."""


class Action(msgspec.Struct, frozen=True, kw_only=True):
    """What a client does with one request.

    Attributes:
        kind: ``complete``: read to ``[DONE]``; ``disconnect``: close the response after
            ``after_chunks`` chunks of text (one that ends sooner completes); ``cancel``:
            close it ``cancel_after_s`` after sending, without reading a chunk.
    """

    kind: Kind
    after_chunks: int = 0
    cancel_after_s: float = 0.0


def client_rng(seed: int, client: int) -> random.Random:
    """Client ``client``'s own generator (independent of the other clients' draws)."""
    return random.Random(seed * 1_000_003 + client)


def draw_action(rng: random.Random, *, disconnect: float, cancel: float, max_tokens: int) -> Action:
    """The next request's action: a disconnect with probability ``disconnect`` (after 1 to
    ``max_tokens // 2`` chunks), a cancel with probability ``cancel``, else read to the end."""
    u = rng.random()
    if u < disconnect:
        return Action(kind="disconnect", after_chunks=rng.randint(1, max(1, max_tokens // 2)))
    if u < disconnect + cancel:
        return Action(kind="cancel", cancel_after_s=rng.uniform(0.0, CANCEL_WITHIN_S))
    return Action(kind="complete")


def request_id(n: int) -> str:
    """The ``n``-th request's id (sent in its prompt and in the ``X-Soak-Request`` header)."""
    return f"soak-{n:06d}"


def prompt(n: int) -> str:
    """A short prompt of its own for the ``n``-th request, naming its id."""
    topic = TOPICS[n % len(TOPICS)]
    return f"[{request_id(n)}] In a few lines of Python, sketch {topic} (variant {n})."


def chat_body(model: str, n: int, max_tokens: int) -> dict[str, object]:
    """The streamed, greedy chat completion of the ``n``-th request."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt(n)}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": True,
    }
