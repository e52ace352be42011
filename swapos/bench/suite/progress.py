"""The suite benchmark's progress: what a runner reports (:class:`Reporter`) and the bar
that shows it (task runs done, passes per mode/arm, ETA)."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from swapos.bench.compare import Key, label
from swapos.records.schema import TaskResult


class Reporter(Protocol):
    """What the runner tells about its progress."""

    def start(self, total: int, keys: Sequence[Key]) -> None: ...

    def advance(self, key: Key, result: TaskResult) -> None: ...


class RichReporter:
    """A ``rich`` progress bar; one unit is one task in one mode/arm."""

    def __init__(self, console: Console | None = None) -> None:
        self._progress = Progress(
            TextColumn("[bold]bench[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[passes]}"),
            console=console,
        )
        self._task: TaskID | None = None
        self._done: dict[Key, int] = {}
        self._passed: dict[Key, int] = {}

    def __enter__(self) -> RichReporter:
        self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def start(self, total: int, keys: Sequence[Key]) -> None:
        """Show a bar of ``total`` task runs over ``keys``."""
        self._done = dict.fromkeys(keys, 0)
        self._passed = dict.fromkeys(keys, 0)
        self._task = self._progress.add_task("bench", total=total, passes=self._passes())

    def advance(self, key: Key, result: TaskResult) -> None:
        """Count one finished task run of ``key``."""
        self._done[key] += 1
        self._passed[key] += result.passed
        if self._task is not None:
            self._progress.update(self._task, advance=1, passes=self._passes())

    def _passes(self) -> str:
        return "  ".join(f"{label(k)} {self._passed[k]}/{self._done[k]}" for k in self._done)
