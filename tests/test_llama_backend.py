"""The llama backend against the bundled Gemma 3 270M (short generations only)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from swapos.backends.llama import LlamaBackend, LlamaModel, load_model
from swapos.data.sampling import SamplingParams
from swapos.errors import ModelFileError
from swapos.models.bundled import bundled_model_path
from swapos.models.spec import ModelSpec
from swapos.sysinfo import host_info, rss_bytes

pytestmark = pytest.mark.real_model

PROMPT = 'def add(a, b):\n    """Return the sum of a and b."""\n    return a + b\n\n' * 3
MiB = 1 << 20
FILE_SIZES = {
    str(bundled_model_path(name)): bundled_model_path(name).stat().st_size
    for name in ("gemma3-270m-q8_0",)
}


def spec_for(name: str = "gemma3-270m-q4_k_m", **kw: int) -> ModelSpec:
    return ModelSpec(name=name, path=str(bundled_model_path(name)), **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def model() -> Iterator[LlamaModel]:
    """One resident model shared by the module (loaded outside any event loop)."""
    loaded = load_model(spec_for(), threading.Event())
    yield loaded
    loaded.close_sync()


async def test_load_generate_close_gives_memory_back() -> None:
    backend = LlamaBackend()
    spec = spec_for("gemma3-270m-q8_0")
    with anyio.fail_after(60):
        start = rss_bytes()
        m = await backend.load(spec)
        assert m.footprint_bytes >= FILE_SIZES[spec.path]
        out = await m.generate(await m.tokenize("Hello"), SamplingParams(max_tokens=4))
        assert out.stats.tokens > 0
        assert rss_bytes() - start > 250 * MiB
        await m.close()
        await m.close()  # idempotent
        assert m.closed
    assert rss_bytes() - start < 40 * MiB


async def test_restored_prefix_generates_the_same_tokens_as_a_full_prefill(
    model: LlamaModel,
) -> None:
    with anyio.fail_after(60):
        prompt = await model.tokenize(PROMPT)
        params = SamplingParams(max_tokens=12)
        split = len(prompt) - 7
        full_pieces: list[str] = []
        full = await model.generate(prompt, params, save_at=split, on_token=full_pieces.append)
        assert full.saved is not None and full.saved.tokens == tuple(prompt[:split])
        assert full.stats.kv_restored_tokens == 0 and full.stats.prefill_tokens == len(prompt)
        pieces: list[str] = []
        again = await model.generate(prompt, params, restore=full.saved, on_token=pieces.append)
    assert again.stats.kv_restored_tokens == split
    assert again.stats.prefill_tokens == len(prompt) - split
    assert pieces == full_pieces
    assert again.text == full.text and again.stats.tokens == full.stats.tokens == 12


async def test_restoring_the_whole_prompt_still_matches(model: LlamaModel) -> None:
    with anyio.fail_after(60):
        prompt = await model.tokenize(PROMPT)
        params = SamplingParams(max_tokens=8)
        full = await model.generate(prompt, params, save_at=len(prompt))
        assert full.saved is not None
        again = await model.generate(prompt, params, restore=full.saved)
    assert again.text == full.text
    assert again.stats.kv_restored_tokens == len(prompt) - 1  # the last token is re-evaluated


async def test_a_restore_that_fails_falls_back_to_full_prefill(model: LlamaModel) -> None:
    with anyio.fail_after(60):
        prompt = await model.tokenize(PROMPT)
        params = SamplingParams(max_tokens=6)
        full = await model.generate(prompt, params, save_at=10)
        assert full.saved is not None
        broken = type(full.saved)(tokens=full.saved.tokens, state=b"\0" * 64)
        again = await model.generate(prompt, params, restore=broken)
    assert again.stats.kv_restored_tokens == 0
    assert again.text == full.text


async def test_cancelling_mid_generation_stops_within_a_token(model: LlamaModel) -> None:
    with anyio.fail_after(60):
        prompt = await model.tokenize(PROMPT)
        cancelled_at: list[float] = []
        with anyio.CancelScope() as scope:

            def on_token(_piece: str) -> None:
                if not cancelled_at:
                    cancelled_at.append(time.perf_counter())
                    scope.cancel()

            await model.generate(prompt, SamplingParams(max_tokens=500), on_token=on_token)
        assert scope.cancelled_caught
        assert time.perf_counter() - cancelled_at[0] < 0.5
        out = await model.generate(prompt, SamplingParams(max_tokens=3))
    assert out.stats.tokens == 3 and out.stats.stop_reason == "length"


async def test_cancelling_a_load_frees_what_it_allocated() -> None:
    backend = LlamaBackend()
    start = rss_bytes()
    with anyio.fail_after(60), anyio.move_on_after(0.05) as scope:
        await backend.load(spec_for("gemma3-270m-f16"))
    assert scope.cancelled_caught
    assert rss_bytes() - start < 40 * MiB


async def test_stop_sequence_cuts_the_text_before_it(model: LlamaModel) -> None:
    with anyio.fail_after(60):
        prompt = await model.tokenize(PROMPT)
        free = await model.generate(prompt, SamplingParams(max_tokens=16))
        assert len(free.text) > 6
        stop = free.text[3:6]  # likely spans a token boundary
        pieces: list[str] = []
        cut = await model.generate(
            prompt, SamplingParams(max_tokens=16, stop=("zzz-never", stop)), on_token=pieces.append
        )
    assert cut.stats.stop_reason == "stop"
    assert cut.text == free.text[: free.text.index(stop)]
    assert "".join(pieces) == cut.text


async def test_max_tokens_and_seeded_sampling(model: LlamaModel) -> None:
    with anyio.fail_after(60):
        prompt = await model.tokenize("Once upon a time")
        params = SamplingParams(max_tokens=10, temperature=0.9, seed=7, top_k=40, top_p=0.9)
        a = await model.generate(prompt, params)
        b = await model.generate(prompt, params)
    assert a.stats.stop_reason == "length" and a.stats.hit_cap and a.stats.tokens == 10
    assert a.text == b.text
    assert 0 < a.stats.prefill_s <= a.stats.ttft_s and a.stats.gen_s >= 0


async def test_a_full_context_stops_generation() -> None:
    spec = spec_for(n_ctx=64)
    with anyio.fail_after(60):
        m = await LlamaBackend().load(spec)
        try:
            prompt = await m.tokenize(PROMPT)
            out = await m.generate(prompt[:60], SamplingParams(max_tokens=16))
        finally:
            await m.close()
    assert out.stats.stop_reason == "context" and out.stats.tokens <= 5


def test_kv_identity_names_the_file_digest_and_settings(model: LlamaModel) -> None:
    assert "sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818" in (
        model.kv_identity
    )
    assert "n_ctx=2048" in model.kv_identity and "kv=f16/f16" in model.kv_identity


async def test_missing_file_is_a_model_file_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "nope.gguf"
    with anyio.fail_after(10), pytest.raises(ModelFileError, match=r"nope\.gguf"):
        await LlamaBackend().load(ModelSpec(name="x", path=str(path)))


@pytest.fixture
def truncated(tmp_path: Path) -> Path:
    """The first 8 MiB of the bundled model: a whole header, most tensor data missing."""
    path = tmp_path / "short.gguf"
    with bundled_model_path("gemma3-270m-q4_k_m").open("rb") as src, path.open("wb") as dst:
        dst.write(src.read(8 * MiB))
    return path


async def test_truncated_file_is_a_model_file_error_naming_it(truncated: Path) -> None:
    path = truncated
    with anyio.fail_after(10), pytest.raises(ModelFileError, match=r"short\.gguf.*truncated"):
        await LlamaBackend().load(ModelSpec(name="x", path=str(path)))


async def test_warm_reads_the_file() -> None:
    with anyio.fail_after(30):
        await LlamaBackend().warm(spec_for())


async def test_token_counter_agrees_with_the_loaded_tokenizer(model: LlamaModel) -> None:
    with anyio.fail_after(30):
        counter = await anyio.to_thread.run_sync(LlamaBackend().token_counter, model.spec)
        assert counter(PROMPT) == len(await model.tokenize(PROMPT))


def test_results_name_the_llama_cpp_python_build_they_ran_on() -> None:
    # Greedy output can differ between llama.cpp builds and CPUs: results say which.
    from importlib import metadata

    assert host_info()["llama_cpp_python"] == metadata.version("llama_cpp_python")
