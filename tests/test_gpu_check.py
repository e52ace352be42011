"""``python -m swapos.bench gpu-check``: skipped here, and its arithmetic on the fake GPU."""

from __future__ import annotations

import argparse
from pathlib import Path

import anyio
import pytest

from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.bench import cli
from swapos.bench.swap.gpu_check import offloaded, run_check, skip_reason
from swapos.bench.swap.measure import Rig
from swapos.clock import MonotonicClock
from swapos.models.profile import ModelConfig, Profile
from swapos.models.spec import ModelSpec

NAMES = ("large", "small")


def test_gpu_check_exits_0_saying_it_was_skipped_on_this_cpu_only_build(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if skip_reason() is None:
        pytest.skip("this machine has a GPU build and a GPU: the check really runs")
    assert cli.main(["gpu-check", "--out", str(tmp_path / "g.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("gpu-check skipped: llama-cpp-python is a CPU-only build")
    assert not (tmp_path / "g.json").exists()


def test_offloaded_profile_puts_every_local_model_on_the_gpu() -> None:
    profile = Profile(
        models={
            "a": ModelConfig(path="/a.gguf"),
            "r": ModelConfig(api_base="http://127.0.0.1:1/v1", api_model="x"),
        }
    )
    models = offloaded(profile).models
    assert models["a"].gpu_layers == "all"
    assert models["r"].gpu_layers == 0  # a remote model stays where its server puts it


@pytest.mark.anyio
async def test_gpu_check_on_the_fake_gpu_swaps_under_the_device_budget() -> None:
    # Two models of 600 device bytes; "one" makes a 750-byte budget: every phase change of
    # the alternating schedule is a device swap, and the budgeted modes stay under it.
    script = FakeModelScript(
        load_s=0.01, upload_s=0.02, token_s=0.002, reply="x y z w", footprint_bytes=100,
        device_bytes=600,
    )  # fmt: skip
    gpu = FakeBackend(MonotonicClock(), dict.fromkeys(NAMES, script), device_memory=1200)
    specs = {n: ModelSpec(name=n, path=f"/nonexistent/{n}.gguf", gpu_layers=-1) for n in NAMES}
    profile = Profile(
        name="fake", budget=10_000, models={n: ModelConfig(path=s.path) for n, s in specs.items()}
    )
    rig = Rig(profile=offloaded(profile), specs=specs, new_backend=lambda: gpu)
    args = argparse.Namespace(device_budget="one", phases=5, tokens=4)
    lines: list[str] = []
    with anyio.fail_after(30):
        report = await run_check(
            rig, args, device_used=lambda: gpu.device_resident_bytes, say=lines.append
        )
    assert report.failures == []
    assert report.device_budget_bytes == 750
    assert [c.layers for c in report.offload] == [32, 32]  # the fake reports "all" as 32
    assert [r.mode for r in report.runs] == ["overlap", "lru", "resident"]
    assert report.peak_device_bytes["overlap"] <= 750
    assert report.peak_device_bytes["lru"] <= 750
    assert report.peak_device_bytes["resident"] == 1200  # the lower bound: both resident
    assert report.swaps == 4  # large small large small large
    assert report.upload_s_per_swap == pytest.approx(0.02)
    assert report.overlap_over_lru is not None and report.overlap_over_resident is not None
    overlap = report.runs[0]
    assert report.hidden_s_per_swap == pytest.approx(
        sum(r.load_hidden_s for r in overlap.records[1:]) / 4
    )
    assert gpu.loads.count("large") >= 3  # the device really swapped (lru reloads it too)


@pytest.mark.anyio
async def test_gpu_check_fails_when_llama_cpp_leaves_layers_on_the_cpu() -> None:
    script = FakeModelScript(load_s=0.0, reply="x", device_bytes=10, gpu_layers=0)
    gpu = FakeBackend(MonotonicClock(), dict.fromkeys(NAMES, script))
    specs = {n: ModelSpec(name=n, path=f"/nonexistent/{n}.gguf", gpu_layers=-1) for n in NAMES}
    profile = Profile(models={n: ModelConfig(path=s.path) for n, s in specs.items()})
    rig = Rig(profile=offloaded(profile), specs=specs, new_backend=lambda: gpu)
    args = argparse.Namespace(device_budget="1000", phases=2, tokens=1)
    with anyio.fail_after(30):
        report = await run_check(rig, args, device_used=lambda: 0, say=lambda _: None)
    assert not report.ok
    assert "large: llama.cpp put 0 of 0 layers on a GPU" in report.failures
