"""The server's decisions: which model's queue is served next, and which model comes next.

``swapos serve`` keeps one queue of requests per model. Serving the queue of the model that
is already resident costs no swap, so it goes first, but not for ever: once another model's
oldest request has waited ``max_wait`` seconds, it is served before anything that arrived
after it (the starvation bound). :func:`pick_queue` is that rule over a snapshot of the
queue heads.

Black-box clients (Aider's architect then editor, a chat UI's summariser after each answer)
do not announce their next model, but they repeat themselves. :class:`Transitions` counts
model-to-model transitions in the request sequence, per client key (a bearer key or the
request's ``user``) and globally, and predicts a client's next model as its most frequent
successor of the current one. The prediction becomes the upcoming use the Prefetcher sees;
whether that is worth a load stays the prefetch cost model's decision.

Pure and synchronous: callers pass the clock's time in; tests use a ``FakeClock``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping

GLOBAL_KEY = ""
"""The key of the transitions of every client together (also used for anonymous ones)."""


def pick_queue(
    heads: Mapping[str, float],
    *,
    now: float,
    max_wait: float,
    current: str | None = None,
    resident: Collection[str] = (),
) -> str | None:
    """The model whose queue is served next, or None when every queue is empty.

    Args:
        heads: model -> arrival time of its oldest waiting request (non-empty queues only).
        now: the current time, on the arrivals' clock.
        max_wait: the starvation bound in seconds.
        current: the model served last (it is resident; its queue goes first).
        resident: models that are loaded now (served before models that need a load).

    Order: ``current``'s queue, then a resident model's, then the oldest head, except that
    a *starving* queue (its oldest request has waited ``max_wait``) goes first when its
    head arrived before the head of the queue that would be served otherwise (the oldest
    starving queue first). The bound this keeps: once a request has waited ``max_wait``,
    no request that arrived after it is served before it. Ties go by model name, so the
    choice never depends on dictionary order.
    """
    if not heads:
        return None

    def oldest(models: Collection[str]) -> str:
        return min(models, key=lambda m: (heads[m], m))

    if current is not None and current in heads:
        preferred = current
    else:
        warm = [m for m in heads if m in resident]
        preferred = oldest(warm or list(heads))
    starving = [m for m in heads if m != preferred and now - heads[m] >= max_wait]
    if starving:
        first = oldest(starving)
        if heads[first] < heads[preferred]:
            return first
    return preferred


class Transitions:
    """Model-to-model transition counts, per client key and over all clients.

    ``observe(key, model)`` records that ``key``'s request after its previous one asked for
    ``model`` (a repeat of the same model counts too: it predicts no swap). A client's next
    model is predicted from its own counts once it has any for its current model, else from
    everyone's.
    """

    def __init__(self) -> None:
        self._last: dict[str, str] = {}
        self._counts: dict[str, dict[str, Counter[str]]] = {}

    def observe(self, key: str, model: str) -> None:
        """Record ``key``'s request for ``model`` (and, for a named key, the global one)."""
        keys = [key] if key == GLOBAL_KEY else [key, GLOBAL_KEY]
        for k in keys:
            prev = self._last.get(k)
            if prev is not None:
                self._counts.setdefault(k, {}).setdefault(prev, Counter())[model] += 1
            self._last[k] = model

    def successors(self, key: str, model: str) -> Counter[str]:
        """How often each model followed ``model`` for ``key`` (a copy)."""
        return Counter(self._counts.get(key, {}).get(model, Counter()))

    def predict(self, key: str, model: str) -> str | None:
        """The most frequent successor of ``model`` for ``key`` (its own history first,
        else every client's), or None if ``model`` was never followed by anything. Ties
        go to the model name that sorts first."""
        for k in (key, GLOBAL_KEY):
            counts = self._counts.get(k, {}).get(model)
            if counts:
                return min(counts, key=lambda m: (-counts[m], m))
        return None

    def counts(self) -> dict[str, dict[str, dict[str, int]]]:
        """Every count as plain data: key -> model -> successor -> times (a copy), what a
        fleet's replicas share (``swapos serve --ray``)."""
        return {
            key: {model: dict(succ) for model, succ in per.items()}
            for key, per in self._counts.items()
        }

    @classmethod
    def from_counts(cls, counts: Mapping[str, Mapping[str, Mapping[str, int]]]) -> Transitions:
        """Transitions that predict from ``counts`` (as :meth:`counts` gives them); the
        sequence seen so far starts empty."""
        made = cls()
        made._counts = {
            key: {model: Counter(succ) for model, succ in per.items()}
            for key, per in counts.items()
        }
        return made
