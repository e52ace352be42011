"""Process memory and host facts, read from ``/proc`` (Linux) with portable fallbacks."""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import resource
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal


def rss_bytes() -> int:
    """Current resident set size of this process."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return peak_rss_bytes()


_BASELINE: list[int] = []


def process_baseline_bytes() -> int:
    """The process's fixed memory: its RSS the first time this is called (SwapOS calls it
    when the first system opens, before any model loads: the interpreter, the libraries,
    the server if one runs), the same value ever after. The process budget counts it
    (docs/timings.md, "What the budget counts")."""
    if not _BASELINE:
        _BASELINE.append(rss_bytes())
    return _BASELINE[0]


def release_free_heap() -> bool:
    """Give freed heap back to the OS (glibc's ``malloc_trim(0)``, every arena): llama.cpp
    and KV snapshots free in worker threads' malloc arenas, which glibc otherwise keeps
    (~50 MB per arena, so RSS would not drop after a close). False where there is no
    glibc (nothing to do)."""
    try:
        return bool(ctypes.CDLL(None).malloc_trim(0))
    except (OSError, AttributeError):
        return False


def status_bytes(status: str, field: str) -> int:
    """A memory ``field`` (``VmRSS``, ``VmHWM``...) of a ``/proc/PID/status`` text, in bytes.

    Raises:
        ValueError: no such line (a process that has exited has no ``Vm`` lines).
    """
    for line in status.splitlines():
        if line.startswith(f"{field}:"):
            value, unit = line.split()[1:3]
            assert unit == "kB", unit
            return int(value) * 1024
    raise ValueError(f"no {field} line in the process status")


def others_cpu_seconds() -> float | None:
    """CPU seconds the machine has spent on processes other than this one since boot: all
    cores' busy time (``/proc/stat``) less this process's (every thread's). Differences
    of two readings say how busy the rest of the machine was between them. None where
    ``/proc/stat`` cannot be read."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    machine = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    own = os.times()
    return machine - (own.user + own.system)


def peak_rss_bytes() -> int:
    """Peak RSS since start or since the last :func:`reset_peak_rss` (``VmHWM``)."""
    try:
        return status_bytes(Path("/proc/self/status").read_text(), "VmHWM")
    except (OSError, ValueError):
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
    devices = backend_devices()
    if devices:
        info["devices"] = "; ".join(d.label for d in devices)
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


# --- llama.cpp's backend devices (GPU offload) -------------------------------------------

GPU_INSTALL_HINT = (
    'install a GPU build: CMAKE_ARGS="-DGGML_CUDA=on" pip install --force-reinstall '
    "--no-cache-dir llama-cpp-python (macOS builds use Metal; docs/gpu.md), or set "
    "gpu_layers = 0"
)
"""The one line that tells a user of a CPU-only build how to get a GPU build."""

DeviceKind = Literal["cpu", "gpu", "igpu", "accel", "other"]
_KINDS: dict[int, DeviceKind] = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel"}


@dataclass(frozen=True)
class BackendDevice:
    """One of llama.cpp's backend devices (``ggml_backend_dev_*``).

    Attributes:
        name: ggml's name for it (``CPU``, ``CUDA0``, ``Metal``).
        description: the hardware (``NVIDIA L4``, the CPU's model).
        kind: what memory it computes in: ``gpu`` (dedicated memory), ``igpu`` (host
            memory), ``cpu``, ``accel`` (BLAS, AMX: beside the CPU).
        free_bytes, total_bytes: its memory as the backend reports it now.
    """

    name: str
    description: str
    kind: DeviceKind
    free_bytes: int
    total_bytes: int

    @property
    def label(self) -> str:
        """``CUDA0 (NVIDIA L4, gpu, 22.5 GiB)``: what headers and results say (its total
        memory: what is free changes from run to run)."""
        return f"{self.name} ({self.description}, {self.kind}, {self.total_bytes / 2**30:.1f} GiB)"


def gpu_offload_supported() -> bool:
    """Whether the installed llama-cpp-python can offload layers to a GPU
    (``llama_supports_gpu_offload``); False without llama-cpp-python."""
    llama = _llama_cpp()
    return llama is not None and bool(llama.llama_supports_gpu_offload())


def backend_devices() -> list[BackendDevice]:
    """llama.cpp's device list (the CPU too), or [] when llama-cpp-python is missing or its
    library does not export the device API."""
    ggml = _ggml_library()
    if ggml is None:
        return []
    devices = []
    for i in range(int(ggml.ggml_backend_dev_count())):
        dev = ggml.ggml_backend_dev_get(i)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        ggml.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        devices.append(
            BackendDevice(
                name=(ggml.ggml_backend_dev_name(dev) or b"").decode(errors="replace"),
                description=(ggml.ggml_backend_dev_description(dev) or b"").decode(
                    errors="replace"
                ),
                kind=_KINDS.get(int(ggml.ggml_backend_dev_type(dev)), "other"),
                free_bytes=int(free.value),
                total_bytes=int(total.value),
            )
        )
    return devices


def gpu_devices() -> list[BackendDevice]:
    """The devices with memory of their own that layers are offloaded to (``gpu``; an
    integrated GPU computes in host memory, which ``budget`` already covers)."""
    return [d for d in backend_devices() if d.kind == "gpu"]


def free_device_bytes() -> int:
    """Free memory of every GPU device together (0 without one)."""
    return sum(d.free_bytes for d in gpu_devices())


def device_used_bytes() -> int:
    """Memory in use on every GPU device together (total less free), 0 without one: the
    llama backend measures a load's device footprint as its change."""
    return sum(d.total_bytes - d.free_bytes for d in gpu_devices())


def _llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError:
        return None
    return llama_cpp


_GGML: list[Any] = []


def _ggml_library() -> Any:
    """ggml's shared library as llama-cpp-python loaded it, its device functions typed."""
    if _GGML:
        return _GGML[0]
    llama = _llama_cpp()
    if llama is None:
        return None
    lib_dir = Path(llama.__file__).parent / "lib"
    lib: Any = None
    for name in ("libggml.so", "libggml.dylib", "ggml.dll"):  # the registry, and its deps
        path = lib_dir / name
        if path.exists():
            with contextlib.suppress(OSError):
                lib = ctypes.CDLL(str(path))
                break
    if lib is None or not hasattr(lib, "ggml_backend_dev_count"):
        return None
    llama.llama_backend_init()  # registers the backends that are built in
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    lib.ggml_backend_dev_count.restype = sz
    lib.ggml_backend_dev_get.argtypes, lib.ggml_backend_dev_get.restype = [sz], vp
    for fn in ("ggml_backend_dev_name", "ggml_backend_dev_description"):
        getattr(lib, fn).argtypes, getattr(lib, fn).restype = [vp], ctypes.c_char_p
    lib.ggml_backend_dev_type.argtypes, lib.ggml_backend_dev_type.restype = [vp], ctypes.c_int
    lib.ggml_backend_dev_memory.argtypes = [vp, ctypes.POINTER(sz), ctypes.POINTER(sz)]
    lib.ggml_backend_dev_memory.restype = None
    _GGML.append(lib)
    return lib
