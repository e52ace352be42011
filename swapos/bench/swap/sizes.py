"""``bench swap --sizes``: how a swap's costs scale with the model's size (issue 13, 4 and 5).

``python -m swapos.bench swap --sizes 0.25,0.5,1,2,4 [--repeats N] [--rounds N]
[--size-tokens N] [--conditions warm,cold] [--out sizes.json]``

For each size (GiB, or with a unit), two synthetic F16 ``llama`` models of that size
(:mod:`swapos.models.synthetic`, seeds 0 and 1, written on first use) and:

1. **Per model**, warm and cold, ``--repeats`` times, interleaved (repeat, condition, size,
   touch; the touches' order rotating from repeat to repeat, since on a virtual machine the
   first cold read of a file after a while can be slower than the next ones): load, then a
   *touch* (:data:`~swapos.bench.swap.sizes_stats.TOUCHES`: nothing, a one-token warm-up decode,
   or a read-through of the file), then the time to first token on a 16-token probe, then
   the same again (the steady time to first token), close, peak RSS.
   The ``none`` samples give the fitted bytes/s of the load; the touches answer whether
   anything left after the load can be moved off the first phase's path (time to ready).
2. **A two-model pipeline** A then B (``--size-tokens`` tokens each) under a budget that
   holds both, ``overlap`` against ``lru``, ``--rounds`` rounds, each round running both
   modes per condition and size, the order rotating: overlap loads B while A generates,
   lru loads it when B's phase asks, so B's hidden fraction against size says how much of a
   swap generation can hide as models grow. (Under a budget for one, prefetch can only warm
   the page cache, which is not counted as hidden load: the fraction would be 0 by
   definition, so the bench uses a budget for two.)

The report (JSON, rich tables, and a PNG when matplotlib is installed) is described in
docs/benchmarks.md, "Size scaling".
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread
import msgspec
from rich.console import Console

from swapos.backends.base import ModelBackend
from swapos.bench.swap.coldcache import DROP_CACHES
from swapos.bench.swap.measure import CacheDropper, Rig, run_mode
from swapos.bench.swap.sizes_report import SizesReport, plot_sizes, print_sizes
from swapos.bench.swap.sizes_stats import (
    TOUCHES,
    SizeRun,
    SizeSample,
    fits,
    overlap_lru_ratios,
    size_label,
    size_mode_stats,
    size_stats,
)
from swapos.bench.swap.workload import PROMPT, pipeline_phases, round_order
from swapos.data.sampling import SamplingParams
from swapos.errors import SwapOSError
from swapos.models.profile import Mode, ModelConfig, Profile
from swapos.models.spec import ModelSpec
from swapos.sysinfo import host_info, peak_rss_bytes, reset_peak_rss, rss_bytes

PROBE_TOKENS = 16
"""Tokens of the time-to-first-token probe: short, so the prefill of a 4 GiB F16 model stays
around a second on two cores and the figure is about getting ready, not about compute."""
PHASE_PROMPT = PROMPT[:15]
"""15 bytes: 16 tokens with BOS under the synthetic byte vocabulary."""
N_CTX = 512
SIZE_MODES: tuple[Mode, ...] = ("overlap", "lru")
BUDGET_SLACK = 1.1
"""The pipeline's budget: the two models' estimated footprints plus 10%."""

Say = Callable[[str], None]


@dataclass(frozen=True)
class SizesRig:
    """What the size bench runs on.

    Attributes:
        new_backend: a fresh backend (one for part 1, one per pipeline run).
        make_model: ``(size_bytes, seed) -> path`` of a model of that size; blocking (it may
            write gigabytes), called in a worker thread.
        drop_caches: the kernel's ``drop_caches`` file (tests pass another).
    """

    new_backend: Callable[[], ModelBackend]
    make_model: Callable[[int, int], Path]
    drop_caches: Path = DROP_CACHES


def real_sizes_rig() -> SizesRig:
    """The llama backend on synthetic models in ``<user cache>/swapos/synthetic``."""
    from swapos.backends.llama import LlamaBackend
    from swapos.models.synthetic import synthetic_model

    return SizesRig(
        new_backend=lambda: LlamaBackend(load_limiter=anyio.CapacityLimiter(1)),
        make_model=lambda size, seed: synthetic_model(size, seed=seed),
    )


@dataclass(frozen=True)
class _Sizes:
    rig: SizesRig
    backend: ModelBackend
    args: argparse.Namespace
    pairs: dict[int, tuple[ModelSpec, ModelSpec]]
    dropper: CacheDropper
    conditions: list[str]
    say: Say


async def run_sizes(rig: SizesRig, args: argparse.Namespace, *, say: Say = print) -> SizesReport:
    """Both parts of the size bench on ``rig`` for ``args.sizes``; progress goes to ``say``.

    Raises:
        SwapOSError: a model could not be written or loaded (the message names it).
    """
    load_start = list(os.getloadavg())
    pairs = {size: await _models(rig, size, say) for size in args.sizes}
    backend = rig.new_backend()
    specs = {s.name: s for pair in pairs.values() for s in pair}
    dropper = CacheDropper(backend, specs, rig.drop_caches)
    conditions = list(args.conditions)
    if "cold" in conditions and not await dropper.drop():
        say(f"cold skipped: {dropper.unavailable}")
        conditions.remove("cold")
    bench = _Sizes(rig, backend, args, pairs, dropper, conditions, say)
    samples = await _measure(bench)
    runs = await _pipelines(bench)
    return SizesReport(
        host=host_info(),
        command=sizes_command(args),
        sizes_bytes=list(args.sizes),
        models={s.name: s.path for s in specs.values()},
        repeats=args.repeats,
        rounds=args.rounds,
        tokens=args.size_tokens,
        probe_tokens=PROBE_TOKENS,
        cold_method=dropper.method,
        cold_skipped=dropper.unavailable if "cold" in args.conditions else None,
        load_avg_start=load_start,
        load_avg_end=list(os.getloadavg()),
        sizes=size_stats(samples),
        fits=fits(samples, conditions),
        modes=size_mode_stats(runs),
        ratios=overlap_lru_ratios(runs),
        samples=samples,
        runs=runs,
    )


async def _models(rig: SizesRig, size: int, say: Say) -> tuple[ModelSpec, ModelSpec]:
    """The two models (seeds 0 and 1) of ``size``, written if missing."""
    label = size_label(size)
    t0 = time.perf_counter()
    paths = [await anyio.to_thread.run_sync(rig.make_model, size, seed) for seed in (0, 1)]
    say(f"models {label}: {', '.join(p.name for p in paths)} ({time.perf_counter() - t0:.1f}s)")
    a, b = (
        ModelSpec(name=f"{label}-{k}", path=str(p), n_ctx=N_CTX)
        for k, p in zip("ab", paths, strict=True)
    )
    return a, b


async def _measure(bench: _Sizes) -> list[SizeSample]:
    """Part 1: model A of every size, per repeat, condition and touch."""
    samples = []
    for rep in range(bench.args.repeats):
        for cond in bench.conditions:
            for size, (spec, _) in bench.pairs.items():
                for touch in round_order(TOUCHES, rep):  # no touch always comes first
                    sample = await measure_size(
                        bench.backend, spec, size, condition=cond, touch=touch,
                        dropper=bench.dropper,
                    )  # fmt: skip
                    if sample is None:
                        continue
                    samples.append(sample)
                    bench.say(
                        f"size {rep + 1}/{bench.args.repeats} {cond:4} {size_label(size):8} "
                        f"{touch:6} load {sample.load_s:.3f}s touch {sample.touch_s:.3f}s "
                        f"ttft {sample.ttft_s:.3f}s steady {sample.steady_ttft_s:.3f}s "
                        f"close {sample.close_s:.3f}s"
                    )
    return samples


async def measure_size(
    backend: ModelBackend,
    spec: ModelSpec,
    size: int,
    *,
    condition: str,
    touch: str,
    dropper: CacheDropper,
) -> SizeSample | None:
    """Load ``spec``, run ``touch``, time the first token twice, close; None when a cold
    drop was impossible. On error or cancellation the model is still closed (shielded)."""
    if condition == "cold":
        if not await dropper.drop():
            return None
    else:
        await backend.warm(spec)
    rss0 = rss_bytes()
    reset_peak_rss()
    t0 = time.perf_counter()
    model = await backend.load(spec)
    try:
        load_s = time.perf_counter() - t0
        rss_load = rss_bytes()
        tokens = (await model.tokenize(PROMPT))[:PROBE_TOKENS]
        params = SamplingParams(max_tokens=1)
        t1 = time.perf_counter()
        if touch == "decode":
            await model.generate(tokens[:1], params)
        elif touch == "warm":
            await backend.warm(spec)
        touch_s = time.perf_counter() - t1 if touch != "none" else 0.0
        first = await model.generate(tokens, params)
        steady = await model.generate(tokens, params)
        peak = peak_rss_bytes()
    finally:
        with anyio.CancelScope(shield=True):
            t2 = time.perf_counter()
            await model.close()
            close_s = time.perf_counter() - t2
    return SizeSample(
        size_bytes=size, file_bytes=_file_bytes(spec.path, size), condition=condition,
        touch=touch, load_s=load_s, touch_s=touch_s, ttft_s=first.stats.ttft_s,
        steady_ttft_s=steady.stats.ttft_s, close_s=close_s, prompt_tokens=len(tokens),
        peak_rss_delta_bytes=peak - rss0, load_rss_delta_bytes=rss_load - rss0,
    )  # fmt: skip


def _file_bytes(path: str, default: int) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return default


async def _pipelines(bench: _Sizes) -> list[SizeRun]:
    """Part 2: A then B per size, overlap and lru, ``--rounds`` rounds."""
    args = bench.args
    runs = []
    for rnd in range(args.rounds):
        for cond in bench.conditions:
            for size, pair in bench.pairs.items():
                rig = pipeline_rig(bench.rig, bench.backend, pair)
                phases = pipeline_phases(
                    [s.name for s in pair], args.size_tokens, prompt=PHASE_PROMPT
                )
                for pos, mode in enumerate(round_order(SIZE_MODES, rnd)):
                    run = await run_mode(
                        rig, mode, phases, condition=cond, round_=rnd, position=pos,
                        dropper=bench.dropper,
                    )  # fmt: skip
                    runs.append(SizeRun(size_bytes=size, run=run))
                    error = f" ERROR {run.error}" if run.error else ""
                    bench.say(
                        f"round {rnd + 1}/{args.rounds} {cond:4} {size_label(size):8} "
                        f"{mode:8} wall {run.wall_s:.2f}s load {run.load_s:.2f}s hidden "
                        f"{run.load_hidden_s:.2f}s swap hidden {run.swap_hidden_fraction:.2f}"
                        f"{error}"
                    )
    return runs


def pipeline_rig(rig: SizesRig, backend: ModelBackend, pair: Sequence[ModelSpec]) -> Rig:
    """A swap-bench rig for ``pair`` under a budget for both (estimates + 10%)."""
    budget = int(BUDGET_SLACK * sum(backend.estimate_footprint(s) for s in pair))
    profile = Profile(
        name=f"synthetic {pair[0].name} + {pair[1].name}",
        budget=budget,
        models={s.name: ModelConfig(path=s.path, n_ctx=s.n_ctx, prompt="completion") for s in pair},
    )
    return Rig(
        profile=profile,
        specs={s.name: s for s in pair},
        new_backend=rig.new_backend,
        drop_caches=rig.drop_caches,
    )


def sizes_command(args: argparse.Namespace) -> str:
    """The command line that reproduces this run."""
    sizes = ",".join(size_label(s) for s in args.sizes)
    return (
        f"python -m swapos.bench swap --sizes {sizes} --repeats {args.repeats} "
        f"--rounds {args.rounds} --size-tokens {args.size_tokens} "
        f"--conditions {','.join(args.conditions)} --out {args.out}"
    )


def main_sizes(args: argparse.Namespace, *, rig: SizesRig | None = None) -> int:
    """Run the size bench, print its tables, write the JSON and (with matplotlib) the PNG
    beside it (``--out`` with the suffix ``.png``)."""
    console = Console(width=None if sys.stdout.isatty() else 150)
    report = anyio.run(partial(run_sizes, rig or real_sizes_rig(), args, say=console.print))
    print_sizes(report, console)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(msgspec.json.format(msgspec.json.encode(report)))
    console.print(f"wrote {args.out}")
    png = args.out.with_suffix(".png")
    try:
        plot_sizes(report, png)
    except SwapOSError as exc:
        console.print(f"no plot: {exc}")
    else:
        console.print(f"wrote {png}")
    return 0
