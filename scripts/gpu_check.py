"""The Python steps of ``scripts/gpu-check.sh`` (docs/gpu.md, "The GPU run").

``models``: synthetic GGUF models of the given sizes (``swapos.models.synthetic``), written
into a folder (needs ``gguf`` and ``numpy``; runs while llama-cpp-python builds).

``profiles``: three profiles on those models (needs llama-cpp-python, for the estimates):
``gpu.toml`` (every layer offloaded, a device budget that holds the two largest models but
not all three, a host budget that holds every model), ``cpu.toml`` (no layer offloaded, the
same rule for the host budget) and ``check.toml`` (every model offloaded, the host budget
that holds them all: ``bench gpu-check`` sets the device budget).
With ``--cpu`` (the rehearsal on a machine without a GPU), ``gpu.toml`` is ``cpu.toml``, so
the GPU steps' commands run.
Roles: reason on the smallest, code on the largest, critic on the middle one, so the swap
bench's rotation (reason, code, critic, fix, critic) swaps on every phase change.

``summary``: the script's verdict from its step records and the reports in the output
folder: ``summary.json`` in the output folder, its text on stdout (so at the end of the
log) and in the work folder's ``summary.md``; exit 1 when the build or a check failed.
Standard library only, so it runs even when the venv could not be made.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

GIB = 1 << 30
HOLDS_TWO_MARGIN = 0.5
"""The budget that holds two: the two largest estimates plus this share of the third."""
HOST_ALL_SLACK = 1.25
"""A budget that holds every model: the sum of their CPU-only host estimates times this."""


def cmd_models(args: argparse.Namespace) -> int:
    from swapos.bench.swap.sizes_stats import parse_sizes, size_label
    from swapos.models.synthetic import synthetic_model

    folder = Path(args.dir)
    made: dict[str, str] = {}
    for size in sorted(parse_sizes(args.sizes)):
        t0 = time.perf_counter()
        path = synthetic_model(size, seed=0, directory=folder)
        made[f"syn-{size_label(size)}"] = str(path)
        print(f"{path.name}: {path.stat().st_size} bytes in {time.perf_counter() - t0:.1f}s")
    (folder / "models.json").write_text(json.dumps(made, indent=2))
    return 0


def _toml(name: str, models: dict[str, str], *, gpu_layers: str, budgets: dict[str, int]) -> str:
    names = list(models)  # smallest first
    lines = [f'name = "{name}"', 'mode = "overlap"']
    lines += [f"{key} = {value}" for key, value in budgets.items()]
    for model, path in models.items():
        lines += ["", f"[models.{model}]", f'path = "{path}"', "n_ctx = 2048",
                  'prompt = "completion"', f"gpu_layers = {gpu_layers}"]  # fmt: skip
    if len(names) >= 3:
        lines += ["", "[roles]", f'reason = "{names[0]}"', f'code = "{names[-1]}"',
                  f'critic = "{names[1]}"']  # fmt: skip
    return "\n".join(lines) + "\n"


def _holds_two(estimates: list[int]) -> int:
    top = sorted(estimates, reverse=True)
    if len(top) < 3:
        return sum(top) * 2
    return int(top[0] + top[1] + HOLDS_TWO_MARGIN * top[2])


def cmd_profiles(args: argparse.Namespace) -> int:
    from swapos.backends.llama.loading import device_footprint_estimate, footprint_estimate
    from swapos.models.bundled import resolve_profile
    from swapos.models.resolve import model_specs

    work = Path(args.work)
    models: dict[str, str] = json.loads((Path(args.dir) / "models.json").read_text())

    def estimates(gpu_layers: str) -> tuple[dict[str, int], dict[str, int]]:
        probe = work / "probe.toml"
        probe.write_text(_toml("probe", models, gpu_layers=gpu_layers, budgets={}))
        specs = model_specs(resolve_profile(str(probe)))
        host = {n: footprint_estimate(s) for n, s in specs.items()}
        return host, {n: device_footprint_estimate(s) for n, s in specs.items()}

    cpu_host, _ = estimates("0")
    gpu_host, gpu_device = estimates('"all"')
    host_all = int(HOST_ALL_SLACK * sum(cpu_host.values()))
    device_two = _holds_two(list(gpu_device.values()))
    host_two = _holds_two(list(cpu_host.values()))
    profiles = {
        "gpu": _toml(
            "synthetic, every layer on the GPU",
            models,
            gpu_layers='"all"',
            budgets={"budget": host_all, "device_budget": device_two},
        ),
        "cpu": _toml(
            "synthetic, no layer on the GPU", models, gpu_layers="0", budgets={"budget": host_two}
        ),
        "check": _toml(
            "synthetic, for gpu-check",
            models,
            gpu_layers='"all"',
            budgets={"budget": host_all},
        ),
    }
    if args.cpu:  # the rehearsal: the GPU steps' commands on a build without a GPU
        profiles["gpu"] = profiles["cpu"].replace("no layer on the GPU", "rehearsal, CPU only")
    for name, text in profiles.items():
        (work / f"{name}.toml").write_text(text)
    info = {
        "models": models,
        "estimates_bytes": {"cpu_host": cpu_host, "gpu_host": gpu_host, "gpu_device": gpu_device},
        "gpu_device_budget_bytes": device_two,
        "gpu_host_budget_bytes": host_all,
        "cpu_host_budget_bytes": host_two,
        "profiles": profiles,
    }
    (work / "profiles.json").write_text(json.dumps(info, indent=2))
    print(f"device budget (gpu.toml) {device_two / GIB:.2f} GiB; host budget (cpu.toml) "
          f"{host_two / GIB:.2f} GiB; device estimates (GiB): "
          + ", ".join(f"{n} {b / GIB:.2f}" for n, b in gpu_device.items()))  # fmt: skip
    return 0


# --- summary (standard library only) ---------------------------------------------------------

BENCH_STEPS = (
    "gpu-check",
    "swap-gpu-warm",
    "decode-gpu",
    "swap-gpu-cold",
    "swap-cpu",
    "decode-cpu",
)
"""The measuring steps, each writing ``<step>.json`` into the output folder."""
SWAP_STEPS = tuple(s for s in BENCH_STEPS if s.startswith("swap-"))
REQUIRED_STEPS = ("venv", "build", "install", "probe", "models", "profiles")
"""Steps without which nothing is measured: any failure (a timeout too) fails the run."""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _steps(work: Path) -> list[dict[str, Any]]:
    try:
        lines = (work / "steps.jsonl").read_text().splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def _figures(out: Path) -> dict[str, Any]:
    """The few numbers of each report that the issue asks for (the reports hold the rest)."""
    figures: dict[str, Any] = {}
    check = _read_json(out / "gpu-check.json")
    if isinstance(check, dict):
        keep = ("skipped", "device_budget_bytes", "baseline_device_bytes", "peak_device_bytes",
                "swaps", "overlap_over_lru", "overlap_over_resident", "upload_s_per_swap",
                "hidden_s_per_swap", "failures", "offload")  # fmt: skip
        figures["gpu-check"] = {k: check.get(k) for k in keep}
    for name in SWAP_STEPS:
        swap = _read_json(out / f"{name}.json")
        if isinstance(swap, dict):
            figures[name] = {
                "budget_bytes": swap.get("budget_bytes"),
                "budget_holds_two": swap.get("budget_holds_two"),
                "models": swap.get("models"),
                "modes": swap.get("modes"),
                "ratios": swap.get("ratios"),
                "targets": swap.get("targets"),
                "errors": [
                    f"{r['mode']}/{r['condition']}: {r['error']}"
                    for r in swap.get("runs", [])
                    if r.get("error")
                ],
            }
    for name in ("decode-gpu", "decode-cpu"):
        decode = _read_json(out / f"{name}.json")
        if isinstance(decode, dict):
            figures[name] = {
                model: {"curve": rep.get("curve"), "costs": rep.get("costs")}
                for model, rep in (decode.get("models") or {}).items()
            }
    return figures


def verdict(
    steps: list[dict[str, Any]], figures: dict[str, Any], *, gpu: bool
) -> tuple[list[str], list[str]]:
    """``(failures, incomplete)`` from the step records and the reports' figures."""
    failures: list[str] = []
    incomplete: list[str] = []
    for step in steps:
        name, rc = step["step"], step["rc"]
        if rc == 0:
            continue
        if step.get("skipped"):
            (failures if name in REQUIRED_STEPS else incomplete).append(
                f"{name}: not run ({step['skipped']})"
            )
        elif step.get("timed_out"):
            (failures if name in REQUIRED_STEPS else incomplete).append(
                f"{name}: timed out after {step['timeout_s']}s"
            )
        else:
            failures.append(f"{name}: exit {rc}")
    check = figures.get("gpu-check")
    if gpu and check is not None and check.get("skipped"):
        failures.append(f"gpu-check skipped on a GPU machine: {check['skipped']}")
    for name in SWAP_STEPS:
        failures += [f"{name}: {e}" for e in (figures.get(name) or {}).get("errors", [])]
    return failures, incomplete


def _build_line(build: dict[str, Any] | None) -> str:
    if not build:
        return "none"
    how = (
        "reused from an earlier call" if build.get("reused")
        else f"prebuilt {build['prebuilt']}" if build.get("prebuilt")
        else f"{build.get('seconds', 0):.0f}s with {build.get('jobs')} jobs"
    )  # fmt: skip
    return (
        f"{how}; CMAKE_ARGS {build.get('cmake_args', '').strip()}; "
        f"{build.get('wheel')} ({build.get('wheel_bytes', 0) / 2**20:.1f} MiB)"
    )


def _md(summary: dict[str, Any]) -> str:
    lines = [f"# gpu-check.sh: {summary['result']}", ""]
    lines += [f"- mode: {'GPU' if summary['gpu'] else 'CPU rehearsal'}",
              f"- devices: {summary.get('devices') or '?'}",
              f"- build: {_build_line(summary.get('build'))}", ""]  # fmt: skip
    lines += ["| step | rc | seconds | timeout | note |", "| --- | --- | --- | --- | --- |"]
    for s in summary["steps"]:
        rc = "skipped" if s.get("skipped") else ("timeout" if s.get("timed_out") else s["rc"])
        lines.append(
            f"| {s['step']} | {rc} | {s['seconds']:.1f} | {s['timeout_s']} | "
            f"{s.get('skipped') or ''} |"
        )
    lines.append("")
    for label, items in (("failed", summary["failures"]), ("incomplete", summary["incomplete"])):
        lines += [f"- {label}: {item}" for item in items]
    check = summary["figures"].get("gpu-check") or {}
    if check:
        lines.append(f"- gpu-check: overlap/lru {check.get('overlap_over_lru')}, upload per "
                     f"swap {check.get('upload_s_per_swap')}s, hidden per swap "
                     f"{check.get('hidden_s_per_swap')}s")  # fmt: skip
    for name in SWAP_STEPS:
        for ratio in (summary["figures"].get(name) or {}).get("ratios") or []:
            lines.append(f"- {name} {ratio['condition']} {ratio['name']}: {ratio['median']:.3f}")
    return "\n".join(lines) + "\n"


def cmd_summary(args: argparse.Namespace) -> int:
    work, out = Path(args.work), Path(args.out)
    steps = _steps(work)
    figures = _figures(out)
    failures, incomplete = verdict(steps, figures, gpu=args.gpu)
    info = {
        "machine": _read_text(work / "machine.txt"),
        "build": _read_json(work / "build.json"),
        "probe": _read_json(work / "probe.json"),
    }
    summary = {
        "result": "FAILED" if failures else ("incomplete" if incomplete else "passed"),
        "gpu": args.gpu,
        "failures": failures,
        "incomplete": incomplete,
        "steps": steps,
        "devices": (info["probe"] or {}).get("devices"),
        "build": info["build"],
        "machine": info["machine"],
        "profiles": _read_json(work / "profiles.json"),
        "figures": figures,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    text = _md(summary)
    (work / "summary.md").write_text(text)
    print(text, end="")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/gpu_check.py")
    sub = parser.add_subparsers(dest="command", required=True)
    models = sub.add_parser("models")
    models.add_argument("--dir", required=True)
    models.add_argument("--sizes", required=True)
    profiles = sub.add_parser("profiles")
    profiles.add_argument("--dir", required=True)
    profiles.add_argument("--work", required=True)
    profiles.add_argument("--cpu", action="store_true", help="gpu.toml without offload")
    summary = sub.add_parser("summary")
    summary.add_argument("--work", required=True)
    summary.add_argument("--out", required=True)
    summary.add_argument("--gpu", action="store_true")
    args = parser.parse_args(argv)
    run = {"models": cmd_models, "profiles": cmd_profiles, "summary": cmd_summary}
    return run[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
