"""KV prefix reuse on the bundled Gemma 3 270M: exactness, survival, refusal (short runs)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from swapos.actors.system import open_system
from swapos.backends.llama import LlamaModel, load_model
from swapos.backends.llama.loading import kv_identity
from swapos.data.prefix import PrefixState
from swapos.data.sampling import SamplingParams
from swapos.kvstore import DiskStore
from swapos.messages.commands import PhaseSpec
from swapos.messages.events import AnyEvent, KVHit, ModelEvicted
from swapos.models.bundled import bundled_model_path
from swapos.models.profile import ModelConfig, Profile
from swapos.models.spec import ModelSpec

pytestmark = pytest.mark.real_model

MODEL = "gemma3-270m-q4_k_m"
STABLE = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\n" * 3
TAILS = ("def mul(a, b):\n", "def neg(a):\n")
GREEDY = SamplingParams(max_tokens=12)


def flip_byte(root: Path, offset_from_end: int) -> None:
    """Corrupt the one state file under ``root``."""
    (path,) = root.glob("*/*.kv")
    data = bytearray(path.read_bytes())
    data[-1 - offset_from_end] ^= 0x01
    path.write_bytes(bytes(data))


def spec_for(name: str = MODEL, n_ctx: int = 2048) -> ModelSpec:
    return ModelSpec(name=name, path=str(bundled_model_path(name)), n_ctx=n_ctx)


@pytest.fixture(scope="module")
def model() -> Iterator[LlamaModel]:
    loaded = load_model(spec_for(), threading.Event())
    yield loaded
    loaded.close_sync()


async def saved_prefix(model: LlamaModel, tail: str) -> tuple[list[int], PrefixState, str]:
    """Prompt tokens, the state after STABLE, and the greedy text of a fresh prefill."""
    tokens = await model.tokenize(STABLE + tail)
    n = len(await model.tokenize(STABLE))
    fresh = await model.generate(tokens, GREEDY)
    out = await model.generate(tokens, GREEDY, save_at=n)
    assert out.saved is not None and len(out.saved.tokens) == n
    assert out.text == fresh.text
    return tokens, out.saved, fresh.text


async def test_greedy_after_restore_is_identical_to_fresh_prefill(model: LlamaModel) -> None:
    with anyio.fail_after(240):
        _, saved, _ = await saved_prefix(model, TAILS[0])
        for tail in TAILS:  # the saved prefix serves a different suffix too
            tokens = await model.tokenize(STABLE + tail)
            fresh = await model.generate(tokens, GREEDY)
            restored = await model.generate(tokens, GREEDY, restore=saved)
            assert restored.stats.kv_restored_tokens == len(saved.tokens)
            assert restored.stats.prefill_tokens == len(tokens) - len(saved.tokens)
            assert restored.text == fresh.text and restored.stats.tokens == fresh.stats.tokens > 0


async def test_state_survives_a_new_store_and_bad_files_are_refused(
    model: LlamaModel, tmp_path: Path
) -> None:
    with anyio.fail_after(240):
        tokens, saved, text = await saved_prefix(model, TAILS[0])
        DiskStore(tmp_path, 1 << 30).put(model.kv_identity, saved)
        found = DiskStore(tmp_path, 1 << 30).longest_prefix(model.kv_identity, tokens)
        assert found.state == saved
        out = await model.generate(tokens, GREEDY, restore=found.state)
        assert out.stats.kv_restored_tokens == len(saved.tokens) and out.text == text
        other_file = kv_identity(spec_for("gemma3-270m-q8_0"))
        other_ctx = kv_identity(spec_for(n_ctx=1024))
        assert model.kv_identity not in (other_file, other_ctx)
        for other in (other_file, other_ctx):
            assert DiskStore(tmp_path, 1 << 30).longest_prefix(other, tokens).state is None
        flip_byte(tmp_path, len(saved.state) // 2)
        bad = DiskStore(tmp_path, 1 << 30).longest_prefix(model.kv_identity, tokens)
        assert bad.state is None and "checksum" in bad.rejected[0].reason
        assert DiskStore(tmp_path, 1 << 30).total_bytes() == 0  # deleted


async def test_backend_falls_back_to_full_prefill_when_restore_fails(model: LlamaModel) -> None:
    with anyio.fail_after(240):
        tokens, saved, text = await saved_prefix(model, TAILS[1])
        broken = PrefixState(tokens=saved.tokens, state=saved.state[: len(saved.state) // 2])
        out = await model.generate(tokens, GREEDY, restore=broken)
    assert out.stats.kv_restored_tokens == 0 and out.stats.prefill_tokens == len(tokens)
    assert out.text == text


def phase(model: str, tail: str) -> PhaseSpec:
    return PhaseSpec(phase="code", model=model, prompt=STABLE + tail, stable_prefix=STABLE,
                     params=GREEDY)  # fmt: skip


async def test_state_survives_eviction_reload_and_restart(tmp_path: Path) -> None:
    profile = Profile(
        name="kv-real",
        budget="500MiB",  # holds one of the two models
        models={
            "coder": ModelConfig(bundled=MODEL),
            "critic": ModelConfig(bundled="gemma3-270m-q8_0"),
        },
    )
    seen: list[AnyEvent] = []
    with anyio.fail_after(600):
        async with open_system(profile, kv_disk_dir=tmp_path, on_event=seen.append) as sys:
            phases = [phase("coder", TAILS[0]), phase("critic", TAILS[0]), phase("coder", TAILS[1])]
            out = await sys.run_phases("t1", phases)
        async with open_system(profile, kv_disk_dir=tmp_path, on_event=seen.append) as sys:
            later = await sys.run_phases("t2", [phase("coder", TAILS[1])])
    assert out.error is None and later.error is None
    evicted = [e.model for e in seen if isinstance(e, ModelEvicted) and e.reason != "shutdown"]
    assert "coder" in evicted
    first, _, retry = out.records
    assert first.kv_restored_tokens == 0
    assert retry.kv_restored_tokens > 0
    # the retry's final state (prompt + answer) is on disk: all but the last prompt token
    assert later.records[0].kv_restored_tokens == later.records[0].prompt_tokens - 1
    assert later.records[0].kv_restored_tokens > retry.kv_restored_tokens
    assert later.outputs[0] == out.outputs[2]
    assert [e.tier for e in seen if isinstance(e, KVHit)] == ["ram", "disk"]


async def test_greedy_after_a_partial_restore_is_identical_to_fresh_prefill(
    model: LlamaModel,
) -> None:
    """A final state (prompt + answer) restored into a prompt that appends to it, that
    diverges from it inside the prompt (KV cells past the common part are dropped), or that
    is the first prompt again: greedy decoding matches a fresh prefill token for token (a
    prefill split at the same point: batch composition changes the last bits of the KV).

    (Truncating *inside the answer* is not asserted: llama.cpp's CPU kernels are not
    batch-invariant, and the answer's cells are computed in a different batch than a fresh
    prefill would use, which can flip a later greedy choice.)"""
    with anyio.fail_after(240):
        first = await model.tokenize(STABLE + TAILS[0])
        out = await model.generate(first, GREEDY, save_final=True)
        final = out.final
        assert final is not None and final.tokens[: len(first)] == tuple(first)
        # The last sampled token is never decoded into the KV cache.
        assert len(final.tokens) == len(first) + out.stats.tokens - 1
        appended = list(final.tokens) + (await model.tokenize("\n\ndef div(a, b):\n"))[1:]
        diverging = first[:-2] + (await model.tokenize("x = 1\n"))[1:]
        for prompt in (appended, diverging, first):
            common = next(
                (i for i, (x, y) in enumerate(zip(final.tokens, prompt, strict=False)) if x != y),
                min(len(final.tokens), len(prompt)),
            )
            keep = min(common, len(prompt) - 1)
            # llama.cpp's CPU kernels are not batch-invariant: compare with a fresh prefill
            # split where the restore splits it (restored cells, then the rest)
            fresh = await model.generate(prompt, GREEDY, save_at=keep)
            restored = await model.generate(prompt, GREEDY, restore=final)
            assert restored.stats.kv_restored_tokens == keep > 0
            assert restored.stats.prefill_tokens == len(prompt) - restored.stats.kv_restored_tokens
            assert restored.text == fresh.text and restored.stats.tokens == fresh.stats.tokens > 0


async def test_truncating_beyond_the_sliding_window_falls_back_to_full_prefill(
    model: LlamaModel,
) -> None:
    """Gemma 3's SWA cache keeps only the last window of cells of a long state: truncating it
    far back would lose cells the next token needs, so the backend prefills instead."""
    with anyio.fail_after(400):
        long = await model.tokenize(STABLE * 12 + TAILS[0])
        assert len(long) > 1000
        out = await model.generate(long, SamplingParams(max_tokens=2), save_final=True)
        assert out.final is not None
        prompt = long[:300] + (await model.tokenize("x = 1\n"))[1:]
        fresh = await model.generate(prompt, GREEDY)
        restored = await model.generate(prompt, GREEDY, restore=out.final)
    assert restored.stats.kv_restored_tokens == 0 and restored.stats.prefill_tokens == len(prompt)
    assert restored.text == fresh.text
