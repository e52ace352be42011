"""``python -m swapos.run [TASK]``: one coding task, end to end, on the real models.

With no arguments it runs the default builtin task on the embedded default profile
(Qwen2.5-Coder 0.5B and 1.5B Instruct: the 0.5B codes, the 1.5B plans and fixes;
``--profile tiny`` is the small Gemma 3 270M set for quick runs), shows what happens as it
happens, prints the per-phase table and writes ``result.json``,
``events.jsonl`` and ``capsule.json`` into the output folder.

Exit codes: 0 the task passed, 1 it failed, 2 it could not run (the reason is printed and
written to ``result.json``), 130 interrupted.

Interrupted (Ctrl-C or SIGTERM, the same on asyncio and trio): the task is cancelled, the
system shuts down as it does at the end of a run (so the event log ends with the phase's,
the task's and the run's ``*Finished`` events), and ``result.json`` and ``capsule.json``
are written from what the event log recorded, marked interrupted. A second signal while
that happens exits at once.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import signal
import sys
from functools import partial
from pathlib import Path

import anyio
import anyio.abc
import msgspec
from rich.console import Console
from rich.markup import escape

from swapos.actors.handle import TaskOutcome
from swapos.actors.system import open_system
from swapos.capsule.schema import Decision, PhaseEntry, encode_capsule, new_capsule
from swapos.cliargs import positive_int
from swapos.console import LiveStatus, interrupt_on_sigterm, print_task_summary
from swapos.data.task import Task
from swapos.errors import SwapOSError, one_error
from swapos.kvstore import default_kv_dir
from swapos.logconfig import configure_logging
from swapos.models.profile import MODES, Mode, Profile
from swapos.models.resolve import checked_model_specs
from swapos.models.spec import ModelSpec
from swapos.pipeline.tasks import DEFAULT_TASK_ID, builtin_suite_path, load_task
from swapos.records.schema import TaskResult

EXIT_PASS, EXIT_FAIL, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


def resolve_task(spec: str | None) -> Task:
    """A task folder path, the id of a builtin task (default: the default task), or a
    HumanEval id (``HumanEval_001``).

    Raises:
        TaskError: the folder is not a valid task, or no builtin task has that id.
    """
    spec = spec or DEFAULT_TASK_ID
    path = Path(spec)
    if not path.exists() and spec.startswith("HumanEval_"):
        from swapos.pipeline.humaneval import load_humaneval

        found = [t for t in load_humaneval() if t.task_id == spec]
        if found:
            return found[0]
    if not path.exists():
        path = builtin_suite_path() / spec
    return load_task(path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m swapos.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "task",
        nargs="?",
        help=f"task folder, builtin id ({DEFAULT_TASK_ID}) or HumanEval id (HumanEval_001)",
    )
    parser.add_argument(
        "--profile",
        help="profile TOML, or a builtin profile: default (Qwen2.5-Coder 1.5B + 0.5B), tiny",
    )
    parser.add_argument("--out", help="output folder (default: runs/<time>-<task>)")
    parser.add_argument(
        "--mode",
        choices=MODES,
        help="swap mode (default: the profile's, normally overlap; docs/architecture.md)",
    )
    parser.add_argument(
        "--max-attempts", type=positive_int, help="code attempts, >= 1 (default: profile)"
    )
    parser.add_argument(
        "--no-kv-cache",
        action="store_true",
        help="disable KV prefix reuse (on by default, with a disk tier in the user cache)",
    )
    parser.add_argument(
        "--html", action="store_true", help="also write report.html: phases, capsule, timeline"
    )
    parser.add_argument("--async-backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.verbose)
    console = Console(highlight=False)
    if not console.is_terminal:  # logs and CI: wide enough for the phase table
        console = Console(highlight=False, width=160)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or f"runs/{stamp}-{(args.task and Path(args.task).name) or 'default'}")
    try:
        prepare_out(out)
    except SwapOSError as exc:
        console.print(f"[bold red]error:[/bold red] {escape(str(exc))}")
        return EXIT_ERROR
    task_id = Path(args.task).name if args.task else DEFAULT_TASK_ID
    interrupt_on_sigterm()
    try:
        task = resolve_task(args.task)
        task_id = task.task_id
        profile = _profile(args.profile)
        specs = checked_model_specs(profile)  # a bad model file: exit 2 before any phase
        run = partial(
            _run,
            task,
            profile,
            specs=specs,
            out=out,
            console=console,
            mode=args.mode,
            max_attempts=args.max_attempts,
            kv_cache=not args.no_kv_cache,
        )
        code = anyio.run(run, backend=args.async_backend)
        if args.html:
            _say_html(console, out)
        _say_unmeasured(console, specs, args.profile or "default")
        return code
    except SwapOSError as exc:
        console.print(f"[bold red]error:[/bold red] {escape(str(exc))}")
        with contextlib.suppress(SwapOSError):
            _write_result(out, TaskResult(task_id=task_id, error=str(exc)))
            console.print(escape(f"wrote {out / 'result.json'}"))
        return EXIT_ERROR
    except KeyboardInterrupt:  # before the event loop ran (loading the task or the profile)
        console.print("[yellow]interrupted[/yellow] before the run started")
        with contextlib.suppress(SwapOSError):
            _write_result(out, TaskResult(task_id=task_id, error="interrupted before any phase"))
        return EXIT_INTERRUPTED


def prepare_out(out: Path) -> None:
    """Create the output folder and check that it takes files.

    Raises:
        SwapOSError: it is a file, cannot be created, or cannot be written (read-only, full).
    """
    probe = out / ".swapos-write-test"
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        raise SwapOSError(
            f"cannot write the results to {out}: {exc.strerror or exc}; choose another --out"
        ) from exc


def _profile(name_or_path: str | None) -> Profile:
    from swapos.models.bundled import resolve_profile

    return resolve_profile(name_or_path)


async def _run(
    task: Task,
    profile: Profile,
    *,
    specs: dict[str, ModelSpec],
    out: Path,
    console: Console,
    mode: Mode | None,
    max_attempts: int | None,
    kv_cache: bool,
) -> int:
    console.print(
        f"[bold]SwapOS[/bold] task [cyan]{escape(task.task_id)}[/cyan] ({task.category}) "
        f"profile [magenta]{escape(profile.name)}[/magenta] -> {escape(str(out))}"
    )
    interrupted: list[str] = []
    targets: list[anyio.CancelScope] = [anyio.CancelScope()]  # a signal cancels the last
    outcome: TaskOutcome | None = None
    budget = 0
    with one_error():  # the signal watcher never fails: the run's error
        async with anyio.create_task_group() as tg:
            await tg.start(_watch_signals, targets, interrupted)
            with targets[0], LiveStatus(console) as status:
                async with open_system(
                    profile,
                    specs=specs,
                    mode=mode,
                    event_log=out / "events.jsonl",
                    on_event=status.on_event,
                    kv_cache=kv_cache,
                    kv_disk_dir=default_kv_dir() if kv_cache else None,
                    process_budget=True,
                ) as system:
                    targets.append(anyio.CancelScope())
                    with targets[-1]:
                        outcome = await system.run_task(task, max_attempts=max_attempts)
                    targets.pop()
                    budget = system.budget_bytes
            tg.cancel_scope.cancel()
    if outcome is None:
        return _write_interrupted(out, task, interrupted[0] if interrupted else "?", console)
    _write_result(out, outcome.result)
    (out / "capsule.json").write_bytes(outcome.capsule_json)
    print_task_summary(console, outcome.result, budget_bytes=budget)
    console.print(
        escape(f"wrote {out / 'result.json'}, {out / 'events.jsonl'}, {out / 'capsule.json'}")
    )
    if outcome.result.error and not outcome.result.passed:
        return EXIT_ERROR if not outcome.result.phases else EXIT_FAIL
    return EXIT_PASS if outcome.result.passed else EXIT_FAIL


def _say_unmeasured(console: Console, specs: dict[str, ModelSpec], profile: str) -> None:
    """Say which models decode plain here because nothing measured this machine's costs."""
    from swapos.backends.llama.draft_costs import unmeasured

    names = unmeasured(specs.values())
    if names:
        console.print(
            escape(
                f"note: decode costs not measured on this machine for {', '.join(names)}: "
                "they decode one token per step and draw in turn; `swapos bench decode "
                f"--profile {profile}` measures them once (about a minute per model)"
            )
        )


async def _watch_signals(
    targets: list[anyio.CancelScope],
    interrupted: list[str],
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """On SIGINT or SIGTERM, cancel ``targets[-1]`` (the task while it runs, so the system
    still closes the way it does after a run; the whole run before and after) and append
    the signal's name to ``interrupted``; a second signal exits at once.

    The same on both backends: a signal handler raising ``KeyboardInterrupt`` unwinds
    asyncio and trio differently, and skips the events the shutdown records.
    """
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            if interrupted:
                os._exit(EXIT_INTERRUPTED)
            interrupted.append(signal.Signals(signum).name)
            targets[-1].cancel()


def _write_interrupted(out: Path, task: Task, signame: str, console: Console) -> int:
    """``result.json`` and ``capsule.json`` from what the event log recorded, marked
    interrupted; the interrupted exit code."""
    result = _recorded_result(out / "events.jsonl", task)
    result.error = (
        f"interrupted by {signame} after {len(result.phases)} phase(s); "
        "result.json and capsule.json hold what the event log recorded until then"
    )
    result.passed = False
    capsule = new_capsule(
        task_id=task.task_id,
        category=task.category,
        goal=task.problem,
        difficulty=task.meta.difficulty,
    )
    history = tuple(
        PhaseEntry(phase=p.phase, model=p.model or "", attempt=p.attempt, outcome=p.outcome)
        for p in result.phases
    )
    decision = Decision(phase="run", text=f"interrupted by {signame}")
    capsule = msgspec.structs.replace(capsule, history=history, decisions=(decision,))
    console.print(f"[yellow]interrupted[/yellow] by {signame}")
    with contextlib.suppress(SwapOSError):
        _write_result(out, result)
        (out / "capsule.json").write_bytes(encode_capsule(capsule))
        console.print(
            escape(f"wrote {out / 'result.json'}, {out / 'events.jsonl'}, {out / 'capsule.json'}")
        )
    return EXIT_INTERRUPTED


def _recorded_result(events: Path, task: Task) -> TaskResult:
    """The task's record as the event log has it (an empty one if the log is unreadable)."""
    from swapos.bench.replay import load_events
    from swapos.records.aggregate import Aggregator

    agg = Aggregator()
    with contextlib.suppress(SwapOSError):
        for ev in load_events(events)[0]:
            agg.feed(ev)
    found = [r for r in agg.tasks.values() if r.task_id == task.task_id]
    return found[-1] if found else TaskResult(task_id=task.task_id, category=task.category)


def _say_html(console: Console, out: Path) -> None:
    try:
        console.print(escape(f"wrote {write_html(out)}"))
    except SwapOSError as exc:  # the run's own outcome stands: only the page is missing
        console.print(f"[bold red]no HTML page:[/bold red] {escape(str(exc))}")


def write_html(out: Path) -> Path:
    """``out/report.html``: the task's page (its timeline, phases and capsule) from the
    ``result.json``, ``capsule.json`` and ``events.jsonl`` of a run's folder.

    Raises:
        SwapOSError: the result or the event log cannot be read.
    """
    from swapos.bench.html import task_page
    from swapos.bench.html_task import read_capsule
    from swapos.bench.replay import load_events

    try:
        result = msgspec.json.decode((out / "result.json").read_bytes(), type=TaskResult)
    except (OSError, msgspec.DecodeError) as exc:
        raise SwapOSError(f"cannot read {out / 'result.json'}: {exc}") from exc
    events, _ = load_events(out / "events.jsonl")
    page = out / "report.html"
    page.write_text(task_page(result, read_capsule(out / "capsule.json"), events), "utf-8")
    return page


def _write_result(out: Path, result: TaskResult) -> None:
    """Write ``result.json`` atomically.

    Raises:
        SwapOSError: the folder stopped taking files (removed, read-only, full disk).
    """
    tmp = out / "result.json.tmp"
    try:
        tmp.write_bytes(msgspec.json.format(msgspec.json.encode(result), indent=2) + b"\n")
        tmp.replace(out / "result.json")
    except OSError as exc:
        raise SwapOSError(f"cannot write {out / 'result.json'}: {exc.strerror or exc}") from exc


if __name__ == "__main__":
    sys.exit(main())
