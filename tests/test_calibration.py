"""Decode costs measured in the background (``backends/llama/calibration.py``), on the real
Gemma 3 270M: a model with none measures them while idle, saves them where ``bench decode``
does, drafts with them at once, and a request that comes meanwhile is served as if nothing
were measuring."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from serve_process import serve_process

from swapos.backends.llama import LlamaBackend, LlamaModel, load_model
from swapos.backends.llama.calibration import (
    BUSY_OK_ENV,
    TRIES,
    Calibration,
    machine_busy,
    needs_calibration,
)
from swapos.backends.llama.draft_costs import cache_path
from swapos.bench.replay import load_events
from swapos.data.generation import DraftCosts
from swapos.data.sampling import SamplingParams
from swapos.messages.events import GenerationFinished
from swapos.models.bundled import bundled_model_path
from swapos.models.digests import file_digest
from swapos.models.spec import ModelSpec, RemoteEndpoint

GEMMA = str(bundled_model_path("gemma3-270m-q4_k_m"))
QWEN = str(bundled_model_path("qwen2.5-coder-0.5b-instruct-q4_k_m"))  # drafts (Gemma: a window)
COSTS = DraftCosts(verify_ratio=(1.0, 1.2))


@pytest.mark.parametrize(
    ("remote", "draft", "costs", "expected"),
    [
        (False, "", None, True),  # nothing measured: measure
        (False, "", COSTS, False),  # cached (or measured already)
        (False, "off", None, False),  # drafting turned off by the profile
        (False, "pinned.json", None, False),  # a pin that could not be read: the user's call
        (True, "", None, False),  # a remote model has no curve of ours
    ],
)
def test_which_models_measure_their_costs(
    remote: bool, draft: str, costs: DraftCosts | None, expected: bool
) -> None:
    api = RemoteEndpoint(base="http://x/v1", model="m") if remote else None
    spec = ModelSpec(name="m", path="/m.gguf", draft=draft, api=api)
    assert needs_calibration(spec, costs) is expected


def _until(done: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.fixture
def gemma(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LlamaModel]:
    """The real Gemma, loaded with no decode costs measured (the decode cache in
    ``tmp_path``); closed after the test (closing twice is harmless)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    model = load_model(ModelSpec(name="gemma", path=GEMMA, n_ctx=1024), threading.Event())
    yield model
    model.close_sync()


def _calibrations() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("calibrate-")]


@pytest.mark.real_model
@pytest.mark.slow
async def test_a_model_with_no_costs_measures_them_while_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the decode cache only: GEMMA is found
    monkeypatch.setenv(BUSY_OK_ENV, "1")  # whatever else the machine runs meanwhile
    spec = ModelSpec(name="gemma", path=GEMMA, n_ctx=1024)
    model = await LlamaBackend(calibrate=True).load(spec)
    try:
        assert model.draft_costs is None and _calibrations() == ["calibrate-gemma"]
        await anyio.to_thread.run_sync(_until, lambda: model.draft_costs is not None)
        costs = model.draft_costs
        assert costs is not None
        assert costs.source.startswith("measured in the background")
        assert costs.verify_ratio[0] == 1.0 and len(costs.verify_ratio) == 12
        assert costs.step_s > 0 and costs.prefill_s_per_token > 0
    finally:
        await model.close()
    saved = cache_path(await anyio.to_thread.run_sync(file_digest, GEMMA), spec.threads)
    assert saved.exists()  # where bench decode saves: every later load reads it
    again = await LlamaBackend(calibrate=True).load(spec)
    try:
        assert again.draft_costs is not None and again.draft_costs.source == str(saved)
        assert _calibrations() == []  # measured: nothing to measure
    finally:
        await again.close()


@pytest.mark.real_model
@pytest.mark.slow
def test_requests_during_the_measurement_are_served_unchanged_and_it_goes_on(
    gemma: LlamaModel,
) -> None:
    params = SamplingParams(temperature=0.0, max_tokens=12)
    prompt = gemma.tokenize_sync("def fib(n):\n    ")

    def answer() -> str:
        return anyio.run(lambda: gemma.generate(prompt, params)).text

    before = answer()
    calibration = Calibration(gemma, idle_s=0.2, poll_s=0.02, others=lambda: 0.0)
    calibration.start()
    during = []
    while calibration.prefills < 2 and calibration.is_alive():  # used mid-way: prefills again
        time.sleep(0.3)
        during.append(answer())
    calibration.join(120)
    assert calibration.costs is not None and calibration.prefills >= 2
    assert during and all(text == before for text in during)
    assert gemma.draft_costs == calibration.costs  # adopted at once
    assert answer() == before  # drafting verifies: greedy text unchanged


@pytest.mark.parametrize(
    ("others_s", "steps_s", "cores", "threads", "busy"),
    [
        (0.0, 10.0, 2, 2, False),  # a quiet machine
        (2.0, 10.0, 2, 2, False),  # a fifth of a core: within the slack
        (3.0, 10.0, 2, 2, True),  # under a benchmark: the threads' cores taken
        (19.0, 10.0, 2, 2, True),
        (20.0, 10.0, 16, 4, False),  # two cores busy of the twelve the threads leave
        (130.0, 10.0, 16, 4, True),
        (5.0, 0.0, 2, 2, False),  # no step timed: nothing to judge
    ],
)
def test_which_measurements_ran_on_a_busy_machine(
    others_s: float, steps_s: float, cores: int, threads: int, busy: bool
) -> None:
    assert machine_busy(others_s, steps_s, cores=cores, threads=threads) is busy


@pytest.mark.real_model
@pytest.mark.slow
def test_a_busy_machine_measures_again_then_gives_up_saving_nothing(
    gemma: LlamaModel, tmp_path: Path
) -> None:
    spent = iter(range(0, 10**9, 100))  # 100 s of other processes' CPU between any two reads
    calibration = Calibration(
        gemma, idle_s=0.05, poll_s=0.02, backoff_s=0.05, others=lambda: float(next(spent))
    )
    calibration.start()
    calibration.join(300)
    assert not calibration.is_alive()
    assert calibration.busy_tries == TRIES and calibration.costs is None
    assert gemma.draft_costs is None  # the model runs on as before, without drafting
    assert not list(tmp_path.rglob("*.json"))  # nothing saved for later loads to read


@pytest.mark.real_model
def test_a_measurement_stops_when_its_model_is_closed(gemma: LlamaModel, tmp_path: Path) -> None:
    calibration = Calibration(gemma, idle_s=60.0, poll_s=0.02)  # never idle long enough
    calibration.start()
    gemma.close_sync()
    calibration.join(10)
    assert not calibration.is_alive() and calibration.costs is None
    assert not list(tmp_path.rglob("*.json"))


@pytest.mark.real_model
@pytest.mark.slow
def test_swapos_serve_measures_an_unmeasured_model_and_drafts_after(tmp_path: Path) -> None:
    """A fresh machine (an empty cache), the command line: the served model measures its
    costs while idle and saves them; the next request decodes with drafting on (whether a
    draft is verified is then the policy's call on what it accepts as it goes)."""
    models = tmp_path / "models"
    models.mkdir()
    os.link(QWEN, models / "qwen.gguf")
    log = str(tmp_path / "ev.jsonl")
    args = (
        "--models-dir",
        str(models),
        "--kv-dir",
        "none",
        "--preload",
        "qwen",
        "--event-log",
        log,
    )
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), BUSY_OK_ENV: "1"}
    with serve_process(*args, calibrate=True, env=env) as (proc, base):
        _until(lambda: bool(list((tmp_path / "cache" / "swapos" / "decode").glob("*.json"))))
        prompt = "1, 2, 3, 4, " * 4
        body = {"model": "qwen", "prompt": prompt, "max_tokens": 48, "temperature": 0}
        r = httpx.post(base + "/v1/completions", json=body, timeout=120)
        assert r.status_code == 200, r.text
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    events, _ = load_events(tmp_path / "ev.jsonl")
    (done,) = [e for e in events if isinstance(e, GenerationFinished)]
    assert done.stats.draft_rule == "lookup1-3"  # the event log says drafting was on ("": off)
