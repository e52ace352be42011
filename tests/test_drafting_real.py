"""Prompt-lookup drafting in the llama decode loop, on the bundled Qwen2.5-Coder 0.5B: the
greedy text is the plain text, stops and caps land where plain decoding puts them, and the
KV state left behind is the plain one. Short generations only."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import anyio
import anyio.to_thread
import pytest

from swapos.backends.llama import LlamaModel, load_model
from swapos.data.generation import DraftRequest
from swapos.data.sampling import SamplingParams
from swapos.models.bundled import bundled_model_path
from swapos.models.spec import ModelSpec

pytestmark = pytest.mark.real_model

CODE = (
    "def parse_query(query: str) -> dict[str, str]:\n"
    '    """Parse a query string such as "a=1&b=2"."""\n'
    "    result = {}\n"
    '    for pair in query.split("&"):\n'
    '        key, value = pair.split("=")\n'
    "        result[key] = value\n"
    "    return result\n"
)
REWRITE = (
    "<|im_start|>user\nRewrite this file, splitting each pair at the first '=' only:\n"
    f"```python\n{CODE}```<|im_end|>\n<|im_start|>assistant\n```python\n"
)
ASK = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
FRESH = ASK.format("Write a Python function that reverses a list.")
FLAT_COSTS_PIN = DraftRequest(max_draft=8)


@pytest.fixture(scope="module")
def model() -> Iterator[LlamaModel]:
    spec = ModelSpec(
        name="small", path=str(bundled_model_path("qwen2.5-coder-0.5b-instruct-q4_k_m")),
        n_ctx=1024, draft="off",
    )  # fmt: skip
    loaded = load_model(spec, threading.Event())
    yield loaded
    loaded.close_sync()


def params(draft: DraftRequest | None, **kw: object) -> SamplingParams:
    base: dict[str, object] = {"max_tokens": 32, "stop": ("\n```",), "draft": draft}
    base.update(kw)
    return SamplingParams(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("prompt", [REWRITE, FRESH])
async def test_greedy_text_with_drafting_is_the_plain_text(model: LlamaModel, prompt: str) -> None:
    with anyio.fail_after(240):
        tokens = await model.tokenize(prompt, special=True)
        plain = await model.generate(tokens, params(None))
        drafted = await model.generate(tokens, params(FLAT_COSTS_PIN))
    assert drafted.text == plain.text
    assert drafted.stats.tokens == plain.stats.tokens
    assert plain.stats.drafted_tokens == 0
    assert plain.stats.draft_rule == ""
    if prompt is REWRITE:  # a rewrite copies the file it was shown: most drafts are taken
        assert drafted.stats.verify_steps > 0
        assert drafted.stats.accepted_tokens > drafted.stats.tokens // 2
        assert drafted.stats.draft_rule == "lookup1-3"


async def test_a_cap_inside_an_accepted_draft_stops_where_plain_does(model: LlamaModel) -> None:
    with anyio.fail_after(240):
        tokens = await model.tokenize(REWRITE, special=True)
        plain = await model.generate(tokens, params(None, max_tokens=13), save_final=True)
        drafted = await model.generate(
            tokens, params(FLAT_COSTS_PIN, max_tokens=13), save_final=True
        )
    assert drafted.stats.tokens == plain.stats.tokens == 13
    assert drafted.stats.stop_reason == "length"
    assert drafted.text == plain.text
    # the KV state left behind holds the same tokens: rejected cells were dropped
    assert plain.final is not None and drafted.final is not None
    assert drafted.final.tokens == plain.final.tokens
    assert drafted.read == plain.read


async def test_a_stop_inside_an_accepted_draft_cuts_the_text_where_plain_does(
    model: LlamaModel,
) -> None:
    with anyio.fail_after(240):
        tokens = await model.tokenize(REWRITE, special=True)
        stop = ('"""',)  # the docstring: copied from the prompt, inside a draft
        plain = await model.generate(tokens, params(None, stop=stop), save_final=True)
        drafted = await model.generate(tokens, params(FLAT_COSTS_PIN, stop=stop), save_final=True)
    assert plain.stats.stop_reason == "stop"
    assert drafted.stats.stop_reason == "stop"
    assert drafted.text == plain.text
    assert drafted.read == plain.read


async def test_a_predicted_output_is_drafted_from(model: LlamaModel) -> None:
    prompt = ASK.format("Write a function that parses a query string.") + "```python\n"
    with anyio.fail_after(240):
        tokens = await model.tokenize(prompt, special=True)
        plain = await model.generate(tokens, params(None))
        hint = DraftRequest(max_draft=8, prediction=plain.text)
        predicted = await model.generate(tokens, params(hint))
    assert predicted.text == plain.text
    assert predicted.stats.draft_rule == "lookup1-3+prediction"
    assert predicted.stats.accepted_tokens > plain.stats.tokens // 2


async def test_draws_side_by_side_are_the_draws_generate_makes(model: LlamaModel) -> None:
    """Lockstep draws on sequences sharing the prompt's cells sample what one generation
    with the same seed samples."""
    with anyio.fail_after(240):
        tokens = await model.tokenize(FRESH, special=True)
        draws = [params(None, max_tokens=8, temperature=0.8, seed=s) for s in (1, 2)]
        alone = [(await model.generate(tokens, p)).text for p in draws]
        got = sorted(await model.generate_draws(tokens, draws), key=lambda d: d.index)
    side_by_side = [d.output.text for d in got]
    assert side_by_side == alone
    assert all(alone)
