"""``python -m swapos.bench gpu-check``: the checks of GPU offload that need a GPU.

On a machine with a GPU and a GPU build of llama-cpp-python (docs/gpu.md):

1. **Offload.** Every model of the profile (default: the embedded default's two Qwen coders)
   is loaded with ``gpu_layers = "all"``; llama.cpp must report every layer on a GPU
   device (its ``load_tensors: layer N assigned to device ...`` lines), and the device
   memory the load took is printed beside the estimate.
2. **Swaps under the device budget.** The swap microbench's alternating schedule
   (:func:`~swapos.bench.swap.workload.alternating`) runs in ``overlap``, ``lru`` and
   ``resident`` (warm page cache, a fresh system each), while the GPUs' used memory is
   sampled; in ``overlap`` and ``lru`` it must stay under ``device_budget`` plus what was
   in use before (``resident``, the lower bound, has no budget). The default
   budget (``--device-budget one``) holds the largest model but not two, so every phase
   change is a device swap, as the CPU default's 1.5 GiB holds one model.
3. **Figures**: overlap/lru and overlap/resident wall time, and per swap the upload
   seconds (measured in step 1) and the load seconds overlap hid behind generation.

Without a GPU (a CPU-only build, or no GPU device) it prints that it was skipped and exits 0,
so CI can run it. Exit 1 when a check fails, 2 on a SwapOS error.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import msgspec
import msgspec.structs

from swapos.backends.base import ModelBackend
from swapos.bench.swap.measure import Rig, run_mode
from swapos.bench.swap.results import ModeRun
from swapos.bench.swap.workload import alternating, pipeline_phases
from swapos.errors import ModelFileError
from swapos.models.gguf import read_gguf
from swapos.models.profile import Mode, Profile, parse_device_budget
from swapos.models.spec import ModelSpec
from swapos.sysinfo import device_used_bytes, gpu_devices, gpu_offload_supported, host_info

MODES: tuple[Mode, ...] = ("overlap", "lru", "resident")
SAMPLE_S = 0.02
"""How often device memory is sampled during the runs."""
ONE_MODEL_SLACK = 1.25
"""``--device-budget one``: the largest model's device estimate times this."""

Say = Callable[[str], None]


class OffloadCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One model loaded with every layer offloaded."""

    model: str
    layers: int
    n_layer: int
    device: str
    device_bytes: int
    estimate_bytes: int
    load_s: float
    upload_s: float
    ok: bool


class GpuCheck(msgspec.Struct, frozen=True, kw_only=True):
    """The check's report (``--out``)."""

    host: dict[str, str]
    skipped: str | None = None
    device_budget_bytes: int = 0
    offload: list[OffloadCheck] = msgspec.field(default_factory=list)
    runs: list[ModeRun] = msgspec.field(default_factory=list)
    baseline_device_bytes: int = 0
    peak_device_bytes: dict[str, int] = msgspec.field(default_factory=dict)
    swaps: int = 0
    overlap_over_lru: float | None = None
    overlap_over_resident: float | None = None
    upload_s_per_swap: float = 0.0
    hidden_s_per_swap: float = 0.0
    failures: list[str] = msgspec.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--profile", default="default", help="profile TOML or builtin name (default: default)")
    add("--device-budget", default="one",
        help='GPU budget: "one" (holds the largest model, not two), "auto", or a size '
        "(default: one)")  # fmt: skip
    add("--phases", type=int, default=9, help="alternating phases (default: 9)")
    add("--tokens", type=int, default=48, help="tokens per phase (default: 48)")
    add("--out", type=Path, default=Path("gpu-check.json"), help="JSON report")


def skip_reason() -> str | None:
    """Why this machine cannot run the check (None: it can)."""
    if not gpu_offload_supported():
        return "llama-cpp-python is a CPU-only build (llama_supports_gpu_offload() is false)"
    if not gpu_devices():
        return "llama.cpp lists no GPU device"
    return None


def main(args: argparse.Namespace) -> int:
    """GPU check: offload the profile's models, swap them under device_budget by mode."""
    reason = skip_reason()
    if reason is not None:
        print(f"gpu-check skipped: {reason}; see docs/gpu.md to install a GPU build")
        return 0
    rig = gpu_rig(args.profile)
    report = anyio.run(lambda: run_check(rig, args, device_used=device_used_bytes))
    print_check(report)
    args.out.write_bytes(msgspec.json.format(msgspec.json.encode(report)))
    print(f"wrote {args.out}")
    return 0 if report.ok else 1


def gpu_rig(profile_name: str) -> Rig:
    """The llama backend on ``profile_name`` with every model's layers on the GPU."""
    from swapos.backends.llama import LlamaBackend
    from swapos.models.bundled import resolve_profile
    from swapos.models.resolve import checked_model_specs

    profile = offloaded(resolve_profile(profile_name))
    return Rig(
        profile=profile,
        specs=checked_model_specs(profile),
        new_backend=lambda: LlamaBackend(load_limiter=anyio.CapacityLimiter(1)),
    )


def offloaded(profile: Profile) -> Profile:
    """``profile`` with ``gpu_layers = "all"`` on every local model."""
    models = {
        name: cfg if cfg.api_base else msgspec.structs.replace(cfg, gpu_layers="all")
        for name, cfg in profile.models.items()
    }
    return msgspec.structs.replace(profile, models=models)


def device_budget(text: str, backend: ModelBackend, specs: list[ModelSpec]) -> int:
    """``--device-budget``: ``one`` (the largest model's estimate x :data:`ONE_MODEL_SLACK`),
    ``auto`` or a size."""
    if text == "one":
        return int(ONE_MODEL_SLACK * max(backend.estimate_device_footprint(s) for s in specs))
    return parse_device_budget(text)


async def run_check(
    rig: Rig, args: argparse.Namespace, *, device_used: Callable[[], int], say: Say = print
) -> GpuCheck:
    """Steps 1 to 3 on ``rig`` (its models already offloaded); ``device_used`` reads the
    GPUs' used memory."""
    backend = rig.new_backend()
    specs = list(rig.specs.values())
    budget = device_budget(args.device_budget, backend, specs)
    rig = Rig(
        profile=msgspec.structs.replace(rig.profile, device_budget=budget),
        specs=rig.specs,
        new_backend=rig.new_backend,
        drop_caches=rig.drop_caches,
    )
    say(f"device budget {budget / 2**20:.0f} MiB")
    offload = [await check_offload(backend, spec, say=say) for spec in specs]
    phases = pipeline_phases(alternating(list(rig.specs), args.phases), args.tokens)
    baseline = device_used()
    peaks: dict[str, int] = {}
    runs: list[ModeRun] = []

    async def sample(mode: str, stop: anyio.Event) -> None:
        while not stop.is_set():
            peaks[mode] = max(peaks.get(mode, baseline), device_used())
            with anyio.move_on_after(SAMPLE_S):
                await stop.wait()

    for mode in MODES:
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sample, mode, stop)
            run = await run_mode(rig, mode, phases, condition="warm")
            peaks[mode] = max(peaks.get(mode, baseline), device_used())
            stop.set()
        runs.append(run)
        say(
            f"{mode:9} wall {run.wall_s:.2f}s load {run.load_s:.2f}s hidden "
            f"{run.load_hidden_s:.2f}s{' ERROR ' + run.error if run.error else ''}"
        )
    return summarize(
        offload, runs, [p.model for p in phases], budget=budget, device=(baseline, peaks)
    )


async def check_offload(
    backend: ModelBackend, spec: ModelSpec, *, say: Say = print
) -> OffloadCheck:
    """Load ``spec`` (every layer offloaded), read what llama.cpp reports, close it."""
    estimate = backend.estimate_device_footprint(spec)
    t0 = time.perf_counter()
    model = await backend.load(spec)
    load_s = time.perf_counter() - t0
    try:
        n_layer = _n_layer(spec)
        placed = model.offload
        check = OffloadCheck(
            model=spec.name,
            layers=placed.layers if placed else 0,
            n_layer=n_layer,
            device=placed.device if placed else "",
            device_bytes=placed.device_bytes if placed else 0,
            estimate_bytes=estimate,
            load_s=load_s,
            upload_s=placed.upload_s if placed else 0.0,
            ok=placed is not None and placed.layers > 0 and placed.layers >= n_layer,
        )
    finally:
        await model.close()
    say(
        f"{spec.name}: {check.layers}/{check.n_layer} layers on {check.device or 'no GPU'}, "
        f"{check.device_bytes / 2**20:.0f} MiB (estimate {estimate / 2**20:.0f}), "
        f"load {load_s:.2f}s of which upload {check.upload_s:.2f}s"
    )
    return check


def _n_layer(spec: ModelSpec) -> int:
    """The model's layer count from its GGUF header (0 for a file that is not one)."""
    try:
        return read_gguf(spec.path).block_count
    except ModelFileError:
        return 0


def summarize(
    offload: list[OffloadCheck],
    runs: list[ModeRun],
    order: list[str],
    *,
    budget: int,
    device: tuple[int, dict[str, int]],
) -> GpuCheck:
    """The figures and the checks from step 1's loads and step 2's runs.

    A swap is a phase whose model differs from the previous phase's. Per swap: the mean
    upload of the models swapped in (step 1's measurement), and the load seconds overlap
    hid (its runs' ``load_hidden_s`` after the first phase, whose load is the cold start).
    ``device`` is the GPUs' used memory before the runs and its peak in each mode.
    """
    baseline, peaks = device
    walls = {r.mode: r.wall_s for r in runs if r.error is None}
    swapped_in = [m for prev, m in itertools.pairwise(order) if m != prev]
    uploads = {c.model: c.upload_s for c in offload}
    overlap = next((r for r in runs if r.mode == "overlap" and r.error is None), None)
    hidden = sum(r.load_hidden_s for r in overlap.records[1:]) if overlap else 0.0
    failures = [
        f"{c.model}: llama.cpp put {c.layers} of {c.n_layer} layers on a GPU" for c in offload
        if not c.ok
    ]  # fmt: skip
    failures += [f"{r.mode}: {r.error}" for r in runs if r.error is not None]
    for mode in ("overlap", "lru"):
        rise = peaks.get(mode, baseline) - baseline
        if rise > budget:
            failures.append(
                f"{mode}: device memory rose {rise / 2**20:.0f} MiB, over the "
                f"{budget / 2**20:.0f} MiB device_budget"
            )
    return GpuCheck(
        host=host_info(),
        device_budget_bytes=budget,
        offload=offload,
        runs=runs,
        baseline_device_bytes=baseline,
        peak_device_bytes=peaks,
        swaps=len(swapped_in),
        overlap_over_lru=_ratio(walls, "overlap", "lru"),
        overlap_over_resident=_ratio(walls, "overlap", "resident"),
        upload_s_per_swap=statistics.fmean(uploads.get(m, 0.0) for m in swapped_in)
        if swapped_in
        else 0.0,
        hidden_s_per_swap=hidden / len(swapped_in) if swapped_in else 0.0,
        failures=failures,
    )


def _ratio(walls: dict[str, float], num: str, den: str) -> float | None:
    return walls[num] / walls[den] if num in walls and walls.get(den, 0.0) > 0 else None


def print_check(report: GpuCheck, say: Say = print) -> None:
    def fmt(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    say(f"devices: {report.host.get('devices', '?')}")
    rises = ", ".join(
        f"{mode} {(peak - report.baseline_device_bytes) / 2**20:.0f}"
        for mode, peak in report.peak_device_bytes.items()
    )
    say(
        f"device memory over baseline at peak (MiB): {rises}; budget "
        f"{report.device_budget_bytes / 2**20:.0f} MiB"
    )
    say(f"overlap/lru {fmt(report.overlap_over_lru)}  overlap/resident "
        f"{fmt(report.overlap_over_resident)}")  # fmt: skip
    say(
        f"per swap ({report.swaps} swaps): upload {report.upload_s_per_swap:.3f}s, hidden "
        f"{report.hidden_s_per_swap:.3f}s"
    )
    for failure in report.failures:
        say(f"FAILED: {failure}")
    say("gpu-check passed" if report.ok else "gpu-check FAILED")
