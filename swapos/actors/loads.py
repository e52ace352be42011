"""What is under way on one model: a load or an eviction, each a handle that owns its end.

As httpcore's ``RequestStatus`` owns the event its waiter blocks on, a :class:`Load` (or an
:class:`Eviction`) is created once, when the work starts, finished once, when it ends, and
joined by whoever waits for that work: a second request for a model that is loading waits
on the same handle. Finishing a handle twice is a bug and raises.
"""

from __future__ import annotations

from typing import Literal

import anyio

LoadOutcome = Literal["loaded", "failed", "denied", "cancelled"]
"""How a load ended: ``loaded``; ``failed`` (an error, or an urgent load that can never
fit); ``denied`` (a prefetch refused room); ``cancelled`` (by an urgent plan or shutdown)."""

Interval = tuple[float, float]


class _Work:
    """Work on a model that others may wait for: one completion event, set once."""

    def __init__(self) -> None:
        self._done = anyio.Event()

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> None:
        """Wait until the work has ended (at once if it has)."""
        await self._done.wait()

    def _finish(self) -> None:
        if self._done.is_set():
            raise RuntimeError(f"{type(self).__name__} finished twice: a bug in the Loader")
        self._done.set()


class Load(_Work):
    """One load of one model, from the moment it is wanted until it is ready or given up.

    Attributes:
        started_speculative: a prefetch started it (an urgent request may join it later).
        scope: cancels the load (an urgent plan cancelling a prefetch; shutdown).
        outcome: how it ends, once decided (:meth:`decide`); a load finished without a
            verdict ends ``cancelled``.
        failure: why it failed or was refused ("" otherwise).
        room: when it made room (its victims closing).
        times: when it ran (the backend's load).
        hidden_credit_s: a finished prefetch's load time, credited to its first lease only.
        progress: how far the backend's load has gone (0 to 1), as it last reported
            (:meth:`report`).
    """

    def __init__(self, *, speculative: bool) -> None:
        super().__init__()
        self.started_speculative = speculative
        self.scope = anyio.CancelScope()
        self.outcome: LoadOutcome | None = None
        self.failure = ""
        self.room: Interval = (0.0, 0.0)
        self.times: Interval = (0.0, 0.0)
        self.hidden_credit_s = 0.0
        self.progress = 0.0

    def report(self, fraction: float) -> None:
        """The backend's progress report (possibly from its loading thread: it only stores
        the value)."""
        self.progress = min(1.0, max(0.0, fraction))

    def decide(self, outcome: LoadOutcome, failure: str = "") -> None:
        """Say how the load ends: once, before it has finished."""
        if self.finished or self.outcome is not None:
            raise RuntimeError(f"a second verdict ({outcome}) on a Load: a bug in the Loader")
        self.outcome, self.failure = outcome, failure

    def finish(self) -> None:
        """End the load (``cancelled`` when no verdict was given) and wake every waiter."""
        if self.outcome is None:
            self.outcome = "cancelled"
        self._finish()

    def take_hidden_credit(self) -> float:
        """The prefetch's load time, once: the first lease gets it, later ones 0."""
        credit, self.hidden_credit_s = self.hidden_credit_s, 0.0
        return credit


class Eviction(_Work):
    """One eviction of one ready model: from the moment it is chosen (a victim, an unload,
    shutdown) until it is closed."""

    def finish(self) -> None:
        """The model is closed: wake every waiter."""
        self._finish()
