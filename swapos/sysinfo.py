"""Process memory and host facts, read from ``/proc`` (Linux) with portable fallbacks."""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import resource
from importlib import metadata
from pathlib import Path


def rss_bytes() -> int:
    """Current resident set size of this process."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return peak_rss_bytes()


def release_free_heap() -> bool:
    """Give freed heap back to the OS (glibc's ``malloc_trim(0)``, every arena): llama.cpp
    and KV snapshots free in worker threads' malloc arenas, which glibc otherwise keeps
    (~50 MB per arena, so RSS would not drop after a close). False where there is no
    glibc (nothing to do)."""
    try:
        return bool(ctypes.CDLL(None).malloc_trim(0))
    except (OSError, AttributeError):
        return False


def peak_rss_bytes() -> int:
    """Peak RSS since start or since the last :func:`reset_peak_rss` (``VmHWM``)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_peak_rss() -> bool:
    """Reset the peak-RSS mark so a phase can measure its own peak; False if unsupported."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


NODE_ENV = "SWAPOS_NODE"
"""Environment variable naming this process's node in a cluster run (set by the Ray worker,
:mod:`swapos.cluster.worker`, before it opens a system); absent in a local run."""


def host_info() -> dict[str, str]:
    """What a results file (and an event log's header) says about the machine it ran on:
    its CPU and llama-cpp-python version too; ``node`` when :data:`NODE_ENV` names one (a
    cluster worker)."""
    info = {
        "hostname": platform.node(),
        "system": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpus": str(os.cpu_count() or 0),
    }
    cpu = _cpu_model()
    if cpu:
        info["cpu"] = cpu
    with contextlib.suppress(metadata.PackageNotFoundError):
        info["llama_cpp_python"] = metadata.version("llama_cpp_python")
    node = os.environ.get(NODE_ENV)
    if node:
        info["node"] = node
    return info


def _cpu_model() -> str:
    """The CPU's model name (Linux), or "": greedy decoding can differ between CPUs and
    between llama.cpp builds, so results say both."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return ""
