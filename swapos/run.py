"""``python -m swapos.run [TASK]``: one coding task, end to end, on the real models.

With no arguments it runs the default builtin task on the embedded default profile
(Qwen2.5-Coder 0.5B and 1.5B Instruct: the 0.5B codes, the 1.5B plans, reviews and fixes;
``--profile tiny`` is the small Gemma 3 270M set for quick runs), shows what happens as it
happens, prints the per-phase table and writes ``result.json``,
``events.jsonl`` and ``capsule.json`` into the output folder.

Exit codes: 0 the task passed, 1 it failed, 2 it could not run (the reason is printed and
written to ``result.json``), 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import sys
from functools import partial
from pathlib import Path

import anyio
import msgspec
from rich.console import Console
from rich.markup import escape

from swapos.actors.system import open_system
from swapos.cliargs import positive_int
from swapos.console import LiveStatus, interrupt_on_sigterm, print_task_summary
from swapos.data.task import Task
from swapos.errors import SwapOSError
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
        return anyio.run(run, backend=args.async_backend)
    except SwapOSError as exc:
        console.print(f"[bold red]error:[/bold red] {escape(str(exc))}")
        with contextlib.suppress(SwapOSError):
            _write_result(out, TaskResult(task_id=task_id, error=str(exc)))
            console.print(escape(f"wrote {out / 'result.json'}"))
        return EXIT_ERROR
    except KeyboardInterrupt:
        console.print(
            "[yellow]interrupted[/yellow]; events written so far are in "
            + escape(str(out / "events.jsonl"))
        )
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
    with LiveStatus(console) as status:
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
            outcome = await system.run_task(task, max_attempts=max_attempts)
    _write_result(out, outcome.result)
    (out / "capsule.json").write_bytes(outcome.capsule_json)
    print_task_summary(console, outcome.result)
    console.print(
        escape(f"wrote {out / 'result.json'}, {out / 'events.jsonl'}, {out / 'capsule.json'}")
    )
    if outcome.result.error and not outcome.result.passed:
        return EXIT_ERROR if not outcome.result.phases else EXIT_FAIL
    return EXIT_PASS if outcome.result.passed else EXIT_FAIL


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
