"""Draws side by side on a real model (the bundled Gemma 3 270M: sliding-window layers)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import anyio
import pytest

from swapos.backends.base import DrawOutput
from swapos.backends.llama import LlamaModel, load_model
from swapos.data.sampling import SamplingParams
from swapos.models.bundled import bundled_model_path
from swapos.models.spec import ModelSpec

pytestmark = pytest.mark.real_model

PROMPT = "def fizzbuzz(n):\n    \"\"\"Return 'Fizz', 'Buzz', 'FizzBuzz' or str(n).\"\"\"\n"


@pytest.fixture(scope="module")
def model() -> Iterator[LlamaModel]:
    name = "gemma3-270m-q4_k_m"
    loaded = load_model(
        ModelSpec(name=name, path=str(bundled_model_path(name)), n_ctx=1024), threading.Event()
    )
    yield loaded
    loaded.close_sync()


def _draws(n: int, max_tokens: int = 12, seed: int = 40) -> list[SamplingParams]:
    return [
        SamplingParams(max_tokens=max_tokens, temperature=0.9, seed=seed + i, stop=("\n\n",))
        for i in range(n)
    ]


async def test_draws_side_by_side_write_what_the_same_draws_write_in_turn(
    model: LlamaModel,
) -> None:
    prompt = await model.tokenize(PROMPT)
    params = [*_draws(3), SamplingParams(max_tokens=0, temperature=0.9, seed=1)]
    with anyio.fail_after(120):
        turn = [await model.generate(prompt, p) for p in params]
        seen: list[int] = []
        side = await model.generate_draws(prompt, params, on_draw=lambda d: seen.append(d.index))
    by = {d.index: d.output for d in side}
    assert sorted(seen) == [0, 1, 2, 3] == sorted(by)
    assert len({o.text for o in turn}) > 1  # the seeds differ, so do the draws
    for i, out in enumerate(turn):
        assert by[i].text == out.text
        assert by[i].stats.tokens == out.stats.tokens
        assert by[i].stats.stop_reason == out.stats.stop_reason
        assert by[i].stats.prefill_tokens == len(prompt)


async def test_draws_restore_a_saved_prompt_and_stop_when_told(model: LlamaModel) -> None:
    prompt = await model.tokenize(PROMPT)
    with anyio.fail_after(120):
        first = await model.generate(prompt, SamplingParams(max_tokens=2), save_at=len(prompt))
        assert first.saved is not None
        seen: list[DrawOutput] = []
        out = await model.generate_draws(
            prompt,
            [*_draws(1, max_tokens=1), *_draws(2, max_tokens=40, seed=50)],
            restore=first.saved,
            on_draw=seen.append,
            stop=lambda: bool(seen),
        )
    assert [d.index for d in out] == [0] == [d.index for d in seen]
    assert out[0].output.stats.kv_restored_tokens == len(prompt) - 1
    assert out[0].output.stats.tokens <= 1
