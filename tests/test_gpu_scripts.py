"""The GPU run's scripts hold together without running them (docs/gpu.md, "The GPU run").

``scripts/gpu-check.sh`` runs only on a machine with a GPU (or as a long CPU rehearsal):
here, its syntax, its refusals, the files it names, what it carries and how its summary
judges a run. No network, no build, no model.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
CHECK = SCRIPTS / "gpu-check.sh"
CARRY = SCRIPTS / "gpu-carry.sh"
MAX_OUT_FILES = 8
"""What comes back from the device machine's $OUT: at most 8 files."""


def _helper() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check_helper", SCRIPTS / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(CHECK), *args], capture_output=True, text=True, timeout=30,
        env={"PATH": "/usr/bin:/bin", **(env or {})}, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("script", [CHECK, CARRY], ids=lambda p: p.name)
def test_the_scripts_parse_and_are_executable(script: Path) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)
    assert script.stat().st_mode & 0o111


def test_gpu_check_refuses_to_start_without_an_output_folder() -> None:
    done = _run()
    assert done.returncode == 2
    assert "needs an output folder" in done.stderr
    assert 'scripts/gpu-check.sh "$OUT"' in done.stderr


def test_gpu_check_refuses_an_unknown_option() -> None:
    done = _run("--gpu", "out")
    assert done.returncode == 2
    assert "unknown option --gpu" in done.stderr


def test_gpu_check_without_the_carry_folder_says_how_to_fill_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _run(str(out), env={"GPU_CHECK_CARRY": str(tmp_path / "no-carry")})
    assert done.returncode == 2
    assert "scripts/gpu-carry.sh" in done.stderr
    assert not out.exists(), "nothing is written before the carried files are found"


def test_the_files_the_scripts_name_exist() -> None:
    text = CHECK.read_text() + CARRY.read_text()
    named = set(re.findall(r"scripts/[\w.-]+", text))
    assert {"scripts/gpu_check.py", "scripts/gpu-requirements.txt"} <= named
    assert [n for n in sorted(named) if not (ROOT / n).exists()] == []


def test_gpu_check_writes_at_most_what_comes_back() -> None:
    """log.txt, the JSON of each measuring step, and the helper's summary.json."""
    written = set(re.findall(r'"\$OUT/([\w.-]+)"', CHECK.read_text()))
    written |= {f"{step}.json" for step in _helper().BENCH_STEPS}
    written |= {"summary.json"}
    assert len(written) <= MAX_OUT_FILES, sorted(written)


def _requirements() -> dict[str, str]:
    lines = (SCRIPTS / "gpu-requirements.txt").read_text().splitlines()
    pins = [line.split("#")[0].strip() for line in lines]
    return dict(p.split("==") for p in pins if p)


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_carried_requirements_are_pinned_and_cover_swapos_dependencies() -> None:
    reqs = _requirements()
    assert all(re.fullmatch(r"[\w.-]+", v) for v in reqs.values()), reqs
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = {
        _normalized(re.split(r"[<>=!~\[; ]", dep)[0])
        for dep in pyproject["project"]["dependencies"]
    } - {"llama-cpp-python"}  # built on the GPU machine from the carried sdist
    assert wanted - {_normalized(n) for n in reqs} == set()


def test_the_carry_folder_is_ignored_by_git() -> None:
    assert "/.carry/" in (ROOT / ".gitignore").read_text().splitlines()


def _step(name: str, rc: int = 0, **extra: Any) -> dict[str, Any]:
    return {"step": name, "rc": rc, "seconds": 1.0, "timeout_s": 60, "timed_out": False,
            "skipped": None, **extra}  # fmt: skip


def test_a_bench_out_of_time_is_incomplete_but_a_build_out_of_time_fails() -> None:
    verdict = _helper().verdict
    steps = [_step("build"), _step("swap-gpu-warm", 124, timed_out=True),
             _step("decode-cpu", 1, skipped="out of time")]  # fmt: skip
    assert verdict(steps, {}, gpu=True) == (
        [],
        ["swap-gpu-warm: timed out after 60s", "decode-cpu: not run (out of time)"],
    )
    failures, _ = verdict([_step("build", 124, timed_out=True)], {}, gpu=True)
    assert failures == ["build: timed out after 60s"]


def test_a_skipped_gpu_check_fails_only_on_a_gpu_machine() -> None:
    verdict = _helper().verdict
    figures = {"gpu-check": {"skipped": "llama.cpp lists no GPU device"}}
    assert verdict([_step("gpu-check")], figures, gpu=False) == ([], [])
    failures, _ = verdict([_step("gpu-check")], figures, gpu=True)
    assert failures == ["gpu-check skipped on a GPU machine: llama.cpp lists no GPU device"]


def test_a_failed_bench_or_a_run_error_fails_the_run() -> None:
    verdict = _helper().verdict
    figures = {"swap-gpu-warm": {"errors": ["lru/warm: out of device memory"]}}
    failures, _ = verdict([_step("gpu-check", 1)], figures, gpu=True)
    assert failures == ["gpu-check: exit 1", "swap-gpu-warm: lru/warm: out of device memory"]


def test_the_summary_is_written_from_the_step_records(tmp_path: Path) -> None:
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    out.mkdir()
    steps = [_step("venv"), _step("build", 2)]
    (work / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "gpu_check.py"), "summary", "--work", str(work),
         "--out", str(out), "--gpu"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["result"] == "FAILED" and summary["failures"] == ["build: exit 2"]
    assert (work / "summary.md").read_text().startswith("# gpu-check.sh: FAILED")
    assert done.stdout.startswith("# gpu-check.sh: FAILED")
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]
