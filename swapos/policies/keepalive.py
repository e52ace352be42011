"""Ollama's ``keep_alive``: how long a model stays resident after a request, as a hint.

An Ollama client says, per request, how long the model should stay loaded once the request
is done: a number of seconds or a Go duration string (``"5m"``, ``"1h30m"``, ``"250ms"``);
``0`` unloads the model as soon as the request ends, a negative value keeps it for ever.
:func:`parse_keep_alive` reads that value (None: the request said nothing).

SwapOS already keeps models resident under its budget and evicts by next use, so a request
that says nothing leaves its model resident until the budget needs the room (as
``keep_alive = -1`` does). A duration is a *hint* on top: :class:`KeepAlive` remembers, per
model, the last duration asked for and when the model was last seen idle, and
:meth:`KeepAlive.expired` names the models whose time is up. The server unloads those that
no request is using or waiting for; a model still in use has its timer restarted when it is
next seen idle, so a hint never unloads a model under a request.

Pure and synchronous: callers pass the clock's time in.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from swapos.data.durations import FOREVER, DurationError, parse_duration

__all__ = ["FOREVER", "KeepAlive", "KeepAliveError", "parse_keep_alive"]


class KeepAliveError(ValueError):
    """A ``keep_alive`` that is neither a number nor a duration string."""


def parse_keep_alive(value: float | str | None) -> float | None:
    """Seconds to keep the model after the request (:data:`FOREVER` for a negative value),
    or None when the request gave none.

    Numbers are seconds. Strings are Go durations: a sign, then one or more
    ``<number><unit>`` parts with units ``ns us µs ms s m h`` (``"1h30m"``), or ``"0"``
    (:func:`~swapos.data.durations.parse_duration`).

    Raises:
        KeepAliveError: a string that is not a duration (the message says what is accepted).
    """
    if value is None:
        return None
    try:
        return parse_duration(value)
    except DurationError as exc:
        if isinstance(value, str):
            raise KeepAliveError(
                f'keep_alive: invalid duration "{value}"; give seconds (300), a duration '
                '("5m", "1h30m", "30s"), 0 to unload after the request or -1 to keep the model'
            ) from exc
        raise KeepAliveError(f"keep_alive must be {exc}") from exc


@dataclass
class _Hint:
    seconds: float
    idle_since: float


@dataclass
class KeepAlive:
    """Per model: the last keep-alive asked for and since when the model has been idle."""

    _hints: dict[str, _Hint] = field(default_factory=dict)

    def finished(self, model: str, seconds: float | None, now: float) -> None:
        """A request of ``model`` ended at ``now`` asking for ``seconds`` (None: it asked
        nothing, and an earlier hint for the model still holds, its timer restarted)."""
        if seconds is None:
            hint = self._hints.get(model)
            if hint is not None:
                hint.idle_since = now
            return
        if seconds == FOREVER:
            self._hints.pop(model, None)
            return
        self._hints[model] = _Hint(seconds=seconds, idle_since=now)

    def expires_at(self, model: str) -> float:
        """When ``model``'s keep-alive runs out, on the callers' clock (:data:`FOREVER`:
        never)."""
        hint = self._hints.get(model)
        return FOREVER if hint is None else hint.idle_since + hint.seconds

    def next_expiry(self) -> float:
        """The soonest expiry of any model (:data:`FOREVER` when none has a hint)."""
        return min((self.expires_at(m) for m in self._hints), default=FOREVER)

    def expired(self, now: float, *, busy: Collection[str] = ()) -> list[str]:
        """Models whose keep-alive has run out by ``now``, sorted; their hints are spent.

        A model in ``busy`` (a request is running or queued for it) is not expired: its
        timer restarts at ``now``, and the request's own end restarts it again.
        """
        due = sorted(m for m in self._hints if self.expires_at(m) <= now)
        out = []
        for model in due:
            if model in busy:
                self._hints[model].idle_since = now
                continue
            del self._hints[model]
            out.append(model)
        return out

    def forget(self, model: str) -> None:
        """Drop ``model``'s hint (it was unloaded)."""
        self._hints.pop(model, None)
