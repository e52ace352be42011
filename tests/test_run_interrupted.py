"""An interrupted ``python -m swapos.run`` (issue 28): SIGTERM ends a run exactly as SIGINT does,
on asyncio and trio. The event log ends with the phase's, the task's and the run's
``*Finished`` events, and ``result.json`` and ``capsule.json`` hold what was recorded, marked
interrupted.

Each case runs ``tests/run_driver.py`` (``swapos.run.main`` on the fake backend, in real time)
in a subprocess and signals it once its first token is in the event log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swapos.capsule.schema import decode_capsule
from swapos.run import EXIT_ERROR, EXIT_INTERRUPTED

DRIVER = Path(__file__).with_name("run_driver.py")


def _wait_for(path: Path, text: str, proc: subprocess.Popen[bytes], deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and proc.poll() is None:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise AssertionError(f"{text} never appeared in {path}")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_after_the_first_token_ends_the_run_and_keeps_what_was_done(
    tmp_path: Path, backend: str, signum: signal.Signals
) -> None:
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), str(out), backend],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(DRIVER.parents[1])},
    )
    try:
        _wait_for(out / "events.jsonl", '"FirstToken"', proc, deadline_s=60)
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = output.decode(errors="replace")
    assert proc.returncode == EXIT_INTERRUPTED, text
    assert "Traceback" not in text, text
    types = [json.loads(line)["type"] for line in (out / "events.jsonl").read_text().splitlines()]
    assert types[-1] == "RunFinished", types[-6:]
    assert "PhaseFinished" in types and "TaskFinished" in types
    result = json.loads((out / "result.json").read_text())
    assert result["task_id"] == "add" and not result["passed"]
    assert f"interrupted by {signum.name}" in result["error"]
    assert result["phases"] and result["phases"][0]["outcome"] == "cancelled"
    capsule = decode_capsule((out / "capsule.json").read_bytes())
    assert capsule.meta.task_id == "add"
    assert any(d.text == f"interrupted by {signum.name}" for d in capsule.decisions)
    assert [h.phase for h in capsule.history] == [p["phase"] for p in result["phases"]]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_error_opening_the_system_is_one_line_not_a_traceback(
    tmp_path: Path, backend: str
) -> None:
    """The signal watcher's task group must not turn the run's own error into a group."""
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(DRIVER.parents[1])}
    env["SWAPOS_DRIVER_FAIL_OPEN"] = "the budget is too small (test)"
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(out), backend],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert proc.returncode == EXIT_ERROR, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "error: the budget is too small (test)" in proc.stdout
    assert (
        json.loads((out / "result.json").read_text())["error"] == "the budget is too small (test)"
    )
