"""A model's lifecycle: its states, the transitions between them, and the one check.

Everything that decides which state a model may move to lives here (h11's ``_state.py``;
llama-swap's ``isValidTransition``). The ledger (:class:`~swapos.policies.ledger.Ledger`)
records each model's state and changes it only through :func:`check_transition`, so a
move that is not in :data:`TRANSITIONS` is a bug that raises at once
(:class:`LifecycleError`), never a model stuck half-way.

:func:`diagram` draws the table for ``docs/architecture.md`` ("A model's lifecycle"); a
test keeps the page equal to it.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import enum
from typing import Literal

ServedState = Literal["absent", "loading", "ready", "evicting"]
"""A model's state as ``swapos serve`` shows it (``/v1/models``, ``/running``, ``/api/ps``)
and ``System.models()`` returns it: :attr:`Lifecycle.served`."""


class Lifecycle(enum.Enum):
    """Where one model is in its lifecycle.

    ``ABSENT``: holds nothing, no load wants it. ``WAITING``: a load wants it and holds no
    room yet (it asks the Evictor). ``LOADING``: room granted, the load runs; its bytes
    count. ``READY``: loaded, may be leased. ``EVICTING``: being closed (a victim, an unload,
    shutdown) or a cancelled load ending; its bytes count until it is absent.
    """

    ABSENT = "absent"
    WAITING = "waiting"
    LOADING = "loading"
    READY = "ready"
    EVICTING = "evicting"

    @property
    def served(self) -> ServedState:
        """The name shown outside the Loader: a load waiting for room is ``loading``."""
        return _SERVED[self]

    @property
    def holds_room(self) -> bool:
        """Whether its bytes count against the budgets (all but absent and waiting)."""
        return self not in (Lifecycle.ABSENT, Lifecycle.WAITING)


_SERVED: dict[Lifecycle, ServedState] = {
    Lifecycle.ABSENT: "absent",
    Lifecycle.WAITING: "loading",
    Lifecycle.LOADING: "loading",
    Lifecycle.READY: "ready",
    Lifecycle.EVICTING: "evicting",
}

ABSENT, WAITING, LOADING, READY, EVICTING = Lifecycle

TRANSITIONS: dict[tuple[Lifecycle, Lifecycle], str] = {
    (ABSENT, WAITING): "a load starts (an acquire or a prefetch)",
    (WAITING, LOADING): "the Evictor's plan fits; room claimed, victims chosen",
    (WAITING, ABSENT): "refused (too big, or a prefetch without room), or cancelled",
    (LOADING, READY): "loaded; its measured footprint replaces the estimate",
    (LOADING, EVICTING): "a prefetch's load cancelled by an urgent plan",
    (LOADING, ABSENT): "the load failed, or was cancelled (shutdown)",
    (READY, EVICTING): "chosen as a victim, unloaded, or closed at shutdown",
    (EVICTING, ABSENT): "closed (or the cancelled load ended)",
}
"""Every move a model's state may make, and what makes it. Nothing else is allowed."""


class LifecycleError(RuntimeError):
    """A model's state was asked to make a move :data:`TRANSITIONS` does not declare: a
    bug in SwapOS (not a :class:`~swapos.errors.SwapOSError`: nothing handles it)."""


def is_valid_transition(old: Lifecycle, new: Lifecycle) -> bool:
    """Whether ``old -> new`` is declared in :data:`TRANSITIONS`."""
    return (old, new) in TRANSITIONS


def check_transition(model: str, old: Lifecycle, new: Lifecycle) -> None:
    """Raise :class:`LifecycleError` unless ``model`` may move from ``old`` to ``new``."""
    if not is_valid_transition(old, new):
        allowed = ", ".join(sorted(n.value for o, n in TRANSITIONS if o is old)) or "nothing"
        raise LifecycleError(
            f"model {model!r} cannot move {old.value} -> {new.value} "
            f"(from {old.value}: {allowed}): a bug in the Loader"
        )


def diagram() -> str:
    """:data:`TRANSITIONS` as a Mermaid state diagram and a Markdown table (for the docs)."""
    lines = ["```mermaid", "stateDiagram-v2", "    [*] --> absent"]
    lines += [f"    {old.value} --> {new.value}: {why}" for (old, new), why in TRANSITIONS.items()]
    lines += ["```", "", "| from | to | when |", "|---|---|---|"]
    lines += [f"| `{o.value}` | `{n.value}` | {why} |" for (o, n), why in TRANSITIONS.items()]
    return "\n".join(lines) + "\n"
