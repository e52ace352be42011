"""The llama backend's offload setting on this machine's CPU-only build (issue 27).

Short: one load of the bundled Gemma 3 270M, no generation. What a GPU build does with the
same setting is checked by ``python -m swapos.bench gpu-check`` on a machine with a GPU.
"""

from __future__ import annotations

import threading

import llama_cpp
import pytest

from swapos.backends.llama import LlamaBackend, load_model
from swapos.backends.llama.loading import _open, model_params
from swapos.backends.llama.runtime import layer_report
from swapos.errors import ProfileError
from swapos.models.bundled import bundled_model_path
from swapos.models.spec import ModelSpec
from swapos.sysinfo import backend_devices, gpu_devices, gpu_offload_supported

pytestmark = pytest.mark.real_model

CPU_ONLY = not llama_cpp.llama_supports_gpu_offload()


def spec(gpu_layers: int, main_gpu: int = 0) -> ModelSpec:
    path = str(bundled_model_path("gemma3-270m-q4_k_m"))
    return ModelSpec(name="g", path=path, n_ctx=256, gpu_layers=gpu_layers, main_gpu=main_gpu)


@pytest.mark.parametrize(("layers", "main_gpu"), [(0, 0), (7, 1), (-1, 0)])
def test_gpu_layers_reach_llama_cpp_model_params(layers: int, main_gpu: int) -> None:
    params = model_params(spec(layers, main_gpu))
    assert (params.n_gpu_layers, params.main_gpu) == (layers, main_gpu)


@pytest.mark.skipif(not CPU_ONLY, reason="a GPU build of llama-cpp-python")
def test_this_cpu_only_build_is_detected_and_refuses_gpu_layers() -> None:
    assert not gpu_offload_supported()
    assert gpu_devices() == []
    assert [d.kind for d in backend_devices()] == ["cpu"]  # llama.cpp's device list
    backend = LlamaBackend()
    backend.check_devices([spec(0)])  # nothing asked of a GPU: fine
    with pytest.raises(ProfileError, match=r"`models\.g\.gpu_layers` = 4, .*CPU-only build"):
        backend.check_devices([spec(4)])


@pytest.mark.skipif(not CPU_ONLY, reason="a GPU build of llama-cpp-python")
def test_a_load_asking_for_layers_on_this_build_reports_them_on_the_cpu() -> None:
    # Past the refusal (a library caller loading directly), llama.cpp gets n_gpu_layers=4,
    # has no GPU to put them on, and says every layer went to the CPU: the model reports
    # no layers offloaded, and its KV states are keyed by the setting it was loaded with.
    model = load_model(spec(4), threading.Event())
    try:
        assert model.offload is not None
        assert (model.offload.layers, model.offload.device_bytes) == (0, 0)
        assert "ngl=4;" in model.kv_identity
    finally:
        model.close_sync()
    with layer_report() as placed:  # what llama.cpp said about each layer
        handles = _open(spec(4), threading.Event())
    llama_cpp.llama_free(handles[1])
    llama_cpp.llama_model_free(handles[0])
    # 18 repeating layers and the output layer (llama.cpp's layer 18), all on the CPU.
    assert sorted(placed) == list(range(19)) and set(placed.values()) == {"CPU"}
    plain = load_model(spec(0), threading.Event())
    try:
        assert plain.offload is None
        assert "ngl=0;" in plain.kv_identity
    finally:
        plain.close_sync()
