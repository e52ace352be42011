"""Which models come after a request: its queue's successors and its client's habit.

The schedule a request publishes (``System.generate(then=...)``) is what the Evictor keeps
and what the Prefetcher brings in while the request generates. Certain next uses come
first: the models whose requests are already queued, oldest first. Then the likely one:
the model this client (its ``user`` field or bearer key, else everyone) most often asked
for after this one (:class:`~swapos.policies.serving.Transitions`). The Prefetcher's cost
model still decides between a full load and a page-cache warm-up.
"""

from __future__ import annotations

from collections.abc import Sequence

from swapos.policies.serving import GLOBAL_KEY, Transitions


class NextModels:
    """Learns the request sequence and names the upcoming models of each request."""

    def __init__(self) -> None:
        self.transitions = Transitions()

    def arrived(self, key: str | None, model: str) -> None:
        """A request of client ``key`` (None: anonymous) for ``model`` arrived."""
        self.transitions.observe(key or GLOBAL_KEY, model)

    def predict(self, key: str | None, model: str) -> str | None:
        """The model client ``key`` is likely to ask for after ``model`` (None: unknown or
        the same model)."""
        nxt = self.transitions.predict(key or GLOBAL_KEY, model)
        return nxt if nxt != model else None

    def upcoming(self, key: str | None, model: str, queued: Sequence[str]) -> list[str]:
        """The models expected after this request of ``model``: the queued ones, then the
        prediction, each once and without ``model`` itself."""
        predicted = self.predict(key, model)
        names = [m for m in queued if m != model] + ([predicted] if predicted else [])
        return list(dict.fromkeys(names))
