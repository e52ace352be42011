"""``bench serve``'s servers: ``swapos serve`` and the ``llama_cpp.server`` peer, each run as a
subprocess on loopback, waited for until ready, and stopped afterwards.

* SwapOS: ``python -m swapos.serve --profile P --host 127.0.0.1 --port N --mode M
  --budget BYTES --event-log PATH``; ready when ``GET /health`` answers 200.
* The peer, llama-cpp-python's OpenAI-compatible server: ``python -m llama_cpp.server
  --config_file cfg.json`` with one entry per model (``model_alias`` = the profile's name) and
  the same files and load settings. It holds **one** model at a time: a request for another
  alias closes the current model and loads that one (``llama_cpp/server/model.py``,
  ``LlamaProxy``), and it serves one request at a time. With a budget for both models, the
  peer is two such servers, one per model, each loaded at start ("both preloaded"), and
  each request goes to its model's server.
* llama.cpp's own server (``bench slots --llama-server PATH``): ``llama-server`` built from
  source, one model with ``-np N`` slots (:func:`llama_server_launch`); ready when ``GET
  /health`` answers 200.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx

from swapos.errors import SwapOSError
from swapos.models.spec import ModelSpec

READY_TIMEOUT_S = 600.0
"""How long a server may take to become ready (it may assemble bundled models first)."""
STOP_TIMEOUT_S = 60.0


class ServerError(SwapOSError):
    """A benchmark server did not start or died (the message names its log)."""


@dataclass(frozen=True)
class Launch:
    """One server process to start.

    Attributes:
        argv: its command line.
        ready_url: polled until it answers 200.
        log: where its stdout and stderr go.
    """

    argv: list[str]
    ready_url: str
    log: Path


def free_port() -> int:
    """A free loopback port (bound, then released for the server to take)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def base_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1"


def health_url(port: int) -> str:
    """Where ``swapos serve`` and ``llama-server`` answer 200 once ready."""
    return f"http://127.0.0.1:{port}/health"


def swapos_launch(
    profile: str,
    port: int,
    *,
    mode: str,
    budget: int,
    event_log: Path,
    log: Path,
    extra: Sequence[str] = (),
) -> Launch:
    """``swapos serve`` on ``port`` with ``budget`` bytes (the contract of issue 11), and
    ``extra`` flags (``--slots N``); never measuring decode costs in the background (a
    benchmark's arms run on the costs ``bench decode`` measured, the same for each)."""
    argv = [
        sys.executable, "-m", "swapos.serve", "--profile", profile, "--host", "127.0.0.1",
        "--port", str(port), "--mode", mode, "--budget", str(budget),
        "--event-log", str(event_log), "--no-calibrate", *extra,
    ]  # fmt: skip
    return Launch(argv=argv, ready_url=health_url(port), log=log)


def peer_config(specs: Sequence[ModelSpec], port: int) -> dict[str, Any]:
    """A ``llama_cpp.server`` config file serving ``specs`` under their profile names, with
    SwapOS's load settings (context, batch, threads, mmap); the first model loads at start."""
    return {
        "host": "127.0.0.1",
        "port": port,
        "models": [
            {
                "model": spec.path,
                "model_alias": spec.name,
                "n_ctx": spec.n_ctx,
                "n_batch": spec.n_batch,
                "n_threads": spec.threads,
                "n_threads_batch": spec.threads,
                "use_mmap": spec.use_mmap,
                "verbose": False,
            }
            for spec in specs
        ],
    }


def peer_launch(specs: Sequence[ModelSpec], port: int, *, workdir: Path, log: Path) -> Launch:
    """``python -m llama_cpp.server --config_file`` for ``specs`` on ``port``."""
    config = workdir / f"llama-cpp-server-{port}.json"
    config.write_text(json.dumps(peer_config(specs, port), indent=2))
    argv = [sys.executable, "-m", "llama_cpp.server", "--config_file", str(config)]
    return Launch(argv=argv, ready_url=f"{base_url(port)}/models", log=log)


def llama_server_launch(
    binary: Path, spec: ModelSpec, port: int, *, slots: int, log: Path
) -> Launch:
    """llama.cpp's ``llama-server`` at ``binary`` serving ``spec`` under its profile name on
    ``port`` with ``slots`` slots (``-np``), each of ``spec.n_ctx`` tokens (``-c`` is their
    total), and SwapOS's load settings: batch (``-b``, ``-ub``), threads, mmap, and weight
    repacking only where the spec asks for it (SwapOS's default is off, llama.cpp's on: the
    same layout on both sides keeps the comparison about serving)."""
    threads = str(spec.threads)
    argv = [
        str(binary), "-m", spec.path, "-a", spec.name, "--host", "127.0.0.1",
        "--port", str(port), "-c", str(spec.n_ctx * slots), "-np", str(slots),
        "-b", str(spec.n_batch), "-ub", str(spec.n_batch), "-t", threads, "-tb", threads,
    ]  # fmt: skip
    if not spec.repack:
        argv.append("--no-repack")
    if not spec.use_mmap:
        argv.append("--no-mmap")
    return Launch(argv=argv, ready_url=health_url(port), log=log)


@contextlib.asynccontextmanager
async def running(launches: Sequence[Launch]) -> AsyncIterator[float]:
    """Start every server, wait until all are ready, yield the seconds that took; stop them
    all on exit (SIGINT, then SIGKILL after :data:`STOP_TIMEOUT_S`).

    Raises:
        ServerError: a server exited or was not ready within :data:`READY_TIMEOUT_S`.
    """
    async with started(launches) as (setup_s, _):
        yield setup_s


@contextlib.asynccontextmanager
async def started(
    launches: Sequence[Launch],
) -> AsyncIterator[tuple[float, list[subprocess.Popen[bytes]]]]:
    """:func:`running`, yielding the server processes too (their ``pid`` to sample them)."""
    procs: list[subprocess.Popen[bytes]] = []
    began = time.perf_counter()
    try:
        for launch in launches:
            procs.append(_start(launch))
        for launch, proc in zip(launches, procs, strict=True):
            await _wait_ready(launch, proc)
        yield time.perf_counter() - began, procs
    finally:
        with anyio.CancelScope(shield=True):
            for proc in procs:
                await _stop(proc)


def _start(launch: Launch) -> subprocess.Popen[bytes]:
    launch.log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[2])  # this swapos, not an installed one
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    with launch.log.open("wb") as log:
        return subprocess.Popen(
            launch.argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


async def _wait_ready(launch: Launch, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    async with httpx.AsyncClient(timeout=5.0) as client:
        while True:
            if proc.poll() is not None:
                what = " ".join([Path(launch.argv[0]).name, *launch.argv[1:4]])
                raise ServerError(
                    f"{what} exited with {proc.returncode} before it was ready; see {launch.log}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(launch.ready_url)).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise ServerError(
                    f"{launch.ready_url} not ready after {READY_TIMEOUT_S:g} s; see {launch.log}"
                )
            await anyio.sleep(0.25)


async def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)

    def wait() -> None:
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    await anyio.to_thread.run_sync(wait)


def model_urls(ports: Mapping[str, int]) -> dict[str, str]:
    """model -> base URL, from model -> port."""
    return {model: base_url(port) for model, port in ports.items()}
