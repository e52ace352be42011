"""``python -m swapos.serve`` in a subprocess, for tests of the command line with real models."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def serve_process(
    *args: str, calibrate: bool = False, env: Mapping[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The server with ``args`` on a free loopback port: its process and base URL, once its
    banner (after any ``--preload``) names the port. Its stderr is drained so it never
    blocks; on exit it is killed unless the test stopped it. ``calibrate``: let it measure
    decode costs in the background (it writes them into the user's cache unless ``env``
    moves ``XDG_CACHE_HOME``)."""
    env = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "swapos.serve", "--port", "0", *args]
    if not calibrate:
        cmd.append("--no-calibrate")
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    drain = threading.Thread(target=proc.stderr.read, daemon=True)
    try:
        base = None
        for line in proc.stderr:
            found = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
            if found:
                base = found.group(1)
                break
        assert base is not None, "the server exited before serving"
        drain.start()
        yield proc, base
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if drain.is_alive():
            drain.join(10)
        proc.stderr.close()
