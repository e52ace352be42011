"""Token taps, by task id: how a caller streams the tokens of its own generations.

Callbacks are not data, so they cannot travel in a ``Generate`` message. A caller of
:meth:`System.generate <swapos.actors.system.System.generate>` registers a tap under its
(unique) task id before the phase starts and removes it after; the Generator calls the tap
of the generation's task, on the event loop thread, with each decoded text piece.
"""

from __future__ import annotations

from collections.abc import Callable

Tap = Callable[[str], None]


class TokenTaps:
    """``task_id -> tap`` for the tasks whose tokens someone is streaming."""

    def __init__(self) -> None:
        self._taps: dict[str, Tap] = {}

    def add(self, task_id: str, tap: Tap) -> None:
        if task_id in self._taps:
            raise ValueError(f"task {task_id!r} already has a token tap")
        self._taps[task_id] = tap

    def remove(self, task_id: str) -> None:
        self._taps.pop(task_id, None)

    def get(self, task_id: str | None) -> Tap | None:
        return self._taps.get(task_id) if task_id is not None else None

    def __len__(self) -> int:
        return len(self._taps)
