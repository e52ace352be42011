"""Slots on a real model (Qwen2.5-Coder 0.5B, 3 slots, short greedy answers): requests side
by side in one context, a grammar-constrained slot beside a free one, one slot cancelled.

What side by side guarantees against the same request alone (docs/serve.md, "Slots"): the
prompt is prefilled alone in its batch, so its KV cells and the first token are the same
bit for bit; a request alone in the engine decodes one row per step, as a generation alone
does, so its whole answer is the same. Later tokens of requests decoded in one batch come
from llama.cpp kernels that do not compute a batch of N rows bit-identically to a batch of
one (as draws side by side, docs/draws.md), so a near tie may flip.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import anyio
import pytest

from swapos.backends.base import GenerationOutput
from swapos.backends.llama import LlamaModel, load_model
from swapos.data.constraint import Constraint
from swapos.data.sampling import SamplingParams
from swapos.models.bundled import bundled_model_path
from swapos.models.spec import ModelSpec

pytestmark = pytest.mark.real_model

NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m"
PROMPTS = ("def fizzbuzz(n):\n", "# Sort a list\ndef sort(xs):\n", "class Stack:\n")
GREEDY = SamplingParams(max_tokens=16)


def _spec(slots: int) -> ModelSpec:
    return ModelSpec(name=NAME, path=str(bundled_model_path(NAME)), n_ctx=256, slots=slots)


@pytest.fixture(scope="module")
def alone() -> Iterator[LlamaModel]:
    loaded = load_model(_spec(1), threading.Event())
    yield loaded
    loaded.close_sync()


@pytest.fixture(scope="module")
def slotted() -> Iterator[LlamaModel]:
    loaded = load_model(_spec(3), threading.Event())
    yield loaded
    loaded.close_sync()


async def _first_piece(model: LlamaModel, prompt: list[int]) -> str:
    return (await model.generate(prompt, SamplingParams(max_tokens=1))).text


async def test_requests_side_by_side_answer_as_each_does_alone(
    alone: LlamaModel, slotted: LlamaModel
) -> None:
    prompts = [await alone.tokenize(p) for p in PROMPTS]
    with anyio.fail_after(300):
        each = [await alone.generate(p, GREEDY) for p in prompts]
        lone = await slotted.generate(prompts[0], GREEDY)  # alone in the engine
        side: list[GenerationOutput | None] = [None] * 3
        streamed: list[list[str]] = [[], [], []]

        async def run(i: int) -> None:
            side[i] = await slotted.generate(prompts[i], GREEDY, on_token=streamed[i].append)

        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(run, i)
    assert lone.text == each[0].text
    assert slotted._engine is not None and slotted._engine.widest == 3
    for i, out in enumerate(side):
        assert out is not None
        assert "".join(streamed[i]) == out.text
        assert out.stats.tokens == GREEDY.max_tokens or out.stats.stop_reason != "length"
        assert out.text.startswith(await _first_piece(alone, prompts[i]))
        assert out.stats.prefill_tokens == len(prompts[i])


async def test_a_grammar_slot_beside_a_free_one(alone: LlamaModel, slotted: LlamaModel) -> None:
    json_bool = Constraint(gbnf='root ::= "{\\"ok\\": " ("true" | "false") "}"', what="a test")
    free, held = await alone.tokenize(PROMPTS[0]), await alone.tokenize("Is 2 even? JSON:")
    with anyio.fail_after(300):
        out: dict[str, GenerationOutput] = {}

        async def run(key: str, prompt: list[int], params: SamplingParams) -> None:
            out[key] = await slotted.generate(prompt, params)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "free", free, GREEDY)
            tg.start_soon(run, "held", held, SamplingParams(max_tokens=16, constraint=json_bool))
    assert out["held"].text in ('{"ok": true}', '{"ok": false}')
    assert out["free"].text.startswith(await _first_piece(alone, free))
    assert out["free"].stats.tokens == 16


async def test_cancelling_one_slot_stops_only_it(alone: LlamaModel, slotted: LlamaModel) -> None:
    prompts = [await alone.tokenize(p) for p in PROMPTS[:2]]
    seen: list[str] = []
    three = anyio.Event()

    def piece(text: str) -> None:
        seen.append(text)
        if len(seen) == 3:
            three.set()

    with anyio.fail_after(300):
        kept: list[GenerationOutput] = []

        async def keep() -> None:
            kept.append(await slotted.generate(prompts[0], GREEDY))

        async def doomed(scope: anyio.CancelScope) -> None:
            with scope:
                await slotted.generate(prompts[1], SamplingParams(max_tokens=200), on_token=piece)

        scope = anyio.CancelScope()
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep)
            tg.start_soon(doomed, scope)
            await three.wait()
            scope.cancel()
        again = await slotted.generate(prompts[0], GREEDY)  # alone again, in a freed slot
    assert scope.cancelled_caught
    assert 3 <= len(seen) < 200
    assert kept[0].stats.tokens == 16
    assert kept[0].text.startswith(await _first_piece(alone, prompts[0]))
    assert slotted._engine is not None and slotted._engine.free() == 3
    assert again.text == (await alone.generate(prompts[0], GREEDY)).text
