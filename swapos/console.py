"""What a person sees while a run goes and after it ends: a live status line, one line per
finished phase, and the per-phase table."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from swapos.messages.events import (
    AnyEvent,
    FirstToken,
    GenerationFinished,
    GenerationProgress,
    GradeFinished,
    GradeStarted,
    LeaseGranted,
    ModelEvicted,
    ModelLoaded,
    ModelLoadStarted,
    PhaseFinished,
    PhaseStarted,
    PrefetchStarted,
    RouterDecided,
)
from swapos.records.schema import PhaseRecord, TaskResult
from swapos.records.summary import peak_rss_text


class LiveStatus:
    """Turns events into a one-line live status plus a printed line per phase.

    Pass :meth:`on_event` as ``open_system(on_event=...)``. Works without a terminal too
    (then only the per-phase lines are printed).
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self._live: Live | None = None
        self._phase = ""
        self._model = ""
        self._what = "starting"
        self._tokens = 0
        self._t = 0.0
        self._gen_started = 0.0

    def __enter__(self) -> LiveStatus:
        if self.console.is_terminal:
            self._live = Live(
                self._render(), console=self.console, refresh_per_second=8, transient=True
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def _render(self) -> Text:
        rate = ""
        if self._tokens > 1 and self._t > self._gen_started:
            rate = f" ({self._tokens / (self._t - self._gen_started):.1f} tok/s)"
        return Text.assemble(
            (f"{self._t:7.1f}s ", "dim"),
            (f"{self._phase:<7}", "bold cyan"),
            " ",
            (f"{self._model:<10}", "magenta"),
            " ",
            self._what,
            rate,
        )

    def on_event(self, ev: AnyEvent) -> None:
        self._t = ev.t
        match ev:
            case PhaseStarted():
                self._phase, self._model = ev.phase, ev.model or ""
                self._what, self._tokens = "waiting for model", 0
            case ModelLoadStarted(speculative=False):
                self._what = f"loading {ev.model}"
            case PrefetchStarted():
                self.console.print(
                    f"[dim]{ev.t:7.1f}s   prefetch ({escape(ev.kind)}) "
                    f"{escape(ev.model or '')}[/dim]"
                )
            case ModelLoaded():
                kind = "prefetched" if ev.speculative else "loaded"
                self.console.print(
                    f"[dim]{ev.t:7.1f}s   {kind} {escape(ev.model or '')} in {ev.load_s:.2f}s "
                    f"({ev.measured_bytes / 2**20:.0f} MiB)[/dim]"
                )
            case ModelEvicted() if ev.reason != "shutdown":
                self.console.print(
                    f"[dim]{ev.t:7.1f}s   evicted {escape(ev.model or '')} "
                    f"({escape(ev.reason)})[/dim]"
                )
            case LeaseGranted():
                self._what, self._gen_started = "prefilling", ev.t
            case FirstToken():
                self._what, self._tokens, self._gen_started = "generating", 1, ev.t
            case GenerationProgress():
                self._tokens = ev.tokens
            case GenerationFinished(stats=st):
                cap = " [yellow](hit max_tokens)[/yellow]" if st.hit_cap else ""
                self.console.print(
                    f"{ev.t:7.1f}s [bold cyan]{escape(f'{self._phase:<7}')}[/bold cyan] "
                    f"[magenta]{escape(f'{self._model:<10}')}[/magenta] {st.tokens} tokens, ttft "
                    f"{st.ttft_s:.2f}s, kv restored {st.kv_restored_tokens}/{st.prompt_tokens}"
                    f"{cap}"
                )
            case GradeStarted():
                self._model, self._what = "", "running tests in sandbox"
            case GradeFinished():
                style = "green" if ev.passed else "red"
                self.console.print(
                    f"{ev.t:7.1f}s [bold cyan]{escape(f'{self._phase:<7}')}[/bold cyan] "
                    f"[{style}]{escape(ev.outcome)}[/{style}]"
                    f" {ev.tests_passed}/{ev.tests_total} tests in {ev.duration_s:.2f}s"
                    + (f" - {escape(ev.reason)}" if not ev.passed and ev.reason else "")
                )
            case RouterDecided():
                self.console.print(f"[dim]{ev.t:7.1f}s   router: {escape(ev.text)}[/dim]")
            case PhaseFinished(error=str(err)):
                self.console.print(f"[red]{ev.t:7.1f}s   phase failed: {escape(err)}[/red]")
            case _:
                pass
        if self._live is not None:
            self._live.update(self._render())


def phase_table(phases: Sequence[PhaseRecord], title: str = "phases") -> Table:
    """The per-phase table: where the time went."""
    table = Table(title=escape(title), title_justify="left")
    for col in (
        "phase",
        "try",
        "model",
        "load s",
        "hidden s",
        "evict s",
        "ttft s",
        "prefill",
        "kv",
        "tokens",
        "tok/s",
        "total s",
        "outcome",
    ):
        table.add_column(col, justify="left" if col in ("phase", "model", "outcome") else "right")
    for p in phases:
        table.add_row(
            escape(p.phase),
            str(p.attempt),
            escape(p.model or "-"),
            f"{p.load_s:.2f}",
            f"{p.load_hidden_s:.2f}",
            f"{p.evict_s:.2f}",
            f"{p.ttft_s:.2f}",
            str(p.prefill_tokens),
            str(p.kv_restored_tokens),
            str(p.tokens),
            f"{p.tok_s:.1f}",
            f"{p.total_s:.2f}",
            escape(p.outcome + (" (cap)" if p.hit_cap and p.outcome != "cap" else "")),
        )
    return table


def print_task_summary(console: Console, result: TaskResult, *, budget_bytes: int = 0) -> None:
    """The phase table, then pass/fail, attempts, tests, wall time, and the peak RSS against
    the memory budget (``budget_bytes``; 0: unknown or unlimited, not shown)."""
    verdict = "[bold green]PASS[/bold green]" if result.passed else "[bold red]FAIL[/bold red]"
    console.print(phase_table(result.phases, title=f"task {result.task_id}"))
    phase_sum = sum(p.total_s for p in result.phases)
    console.print(
        f"{verdict}  {escape(result.task_id)} ({escape(result.category)})  "
        f"attempts {result.iterations}  "
        f"tests {result.tests_passed}/{result.tests_total}  wall {result.wall_clock_s:.2f}s "
        f"(phases {phase_sum:.2f}s){_peak_of_budget(result, budget_bytes)}"
    )
    if result.error:
        console.print(f"[red]error:[/red] {escape(result.error)}")


def _peak_of_budget(result: TaskResult, budget_bytes: int) -> str:
    """``  peak RSS 1545 MiB of 1536 MiB budget (1.01x)``, or "" without a finite budget."""
    peak = max((p.peak_rss_bytes for p in result.phases), default=0)
    text = peak_rss_text(peak, budget_bytes)
    return f"  {text}" if text else ""


def interrupt_on_sigterm() -> None:
    """Treat SIGTERM like Ctrl-C, so a killed run still writes what it finished."""
    import signal

    def _interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)
