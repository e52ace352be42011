"""A small resident model drafting for a large one (issue 26, item 3), on the bundled
Qwen2.5-Coder 0.5B and 1.5B, which share their vocabulary: the greedy text is the plain text,
a busy or closed drafter is skipped (another vocabulary is refused by the rule:
``tests/test_model_drafts.py``). Drafting from a
model never pays on this 2-core CPU (``policies/model_drafts.py``), so the length is pinned
here; on a machine where the rule says it pays, the same path runs unpinned."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from swapos.backends.llama import LlamaBackend, LlamaModel
from swapos.data.generation import DraftRequest
from swapos.data.sampling import SamplingParams
from swapos.models.bundled import bundled_model_path
from swapos.models.spec import ModelSpec

pytestmark = pytest.mark.real_model

PROMPT = (
    "<|im_start|>user\nWrite a Python function `is_palindrome(s: str) -> bool` that ignores "
    "case and non-letters.<|im_end|>\n<|im_start|>assistant\n```python\n"
)
PINNED = DraftRequest(model_draft=4)


def spec(name: str, package: str) -> ModelSpec:
    return ModelSpec(name=name, path=str(bundled_model_path(package)), n_ctx=1024, draft="off")


@pytest.fixture
async def models() -> AsyncIterator[tuple[LlamaBackend, LlamaModel, LlamaModel]]:
    backend = LlamaBackend()
    large = await backend.load(spec("large", "qwen2.5-coder-1.5b-instruct-q4_k_m"))
    small = await backend.load(spec("small", "qwen2.5-coder-0.5b-instruct-q4_k_m"))
    yield backend, large, small
    await small.close()
    await large.close()


def params(draft: DraftRequest | None) -> SamplingParams:
    return SamplingParams(max_tokens=40, stop=("\n```",), draft=draft)


async def test_the_small_models_drafts_leave_the_large_models_greedy_text_as_it_was(
    models: tuple[LlamaBackend, LlamaModel, LlamaModel],
) -> None:
    backend, large, small = models
    assert {m.name for m in backend.resident()} == {"large", "small"}
    assert large.token_table == small.token_table != ""  # checked, not assumed from names
    with anyio.fail_after(300):
        tokens = await large.tokenize(PROMPT, special=True)
        plain = await large.generate(tokens, params(None))
        drafted = await large.generate(tokens, params(PINNED))
        again = await large.generate(tokens, params(PINNED))  # a new draft of the same
    assert drafted.text == plain.text == again.text
    assert drafted.stats.tokens == plain.stats.tokens
    assert plain.stats.drafted_tokens == 0 and plain.stats.draft_rule == ""
    assert drafted.stats.draft_rule == "model:small"
    assert drafted.stats.verify_steps > 0 and drafted.stats.drafted_tokens > 0
    # two sizes of one family agree on most greedy tokens of a short function
    assert drafted.stats.accepted_tokens > drafted.stats.drafted_tokens // 3


async def test_a_busy_drafter_is_skipped_and_a_closed_one_is_gone(
    models: tuple[LlamaBackend, LlamaModel, LlamaModel],
) -> None:
    backend, large, small = models
    with anyio.fail_after(300):
        tokens = await large.tokenize(PROMPT, special=True)
        plain = await large.generate(tokens, params(None))
        with small.lend() as lent:  # its lock is taken: the large model must not wait
            assert lent is not None
            busy = await large.generate(tokens, params(PINNED))
        await small.close()
        closed = await large.generate(tokens, params(PINNED))
    assert busy.text == closed.text == plain.text
    assert busy.stats.draft_rule == "model:small" and busy.stats.drafted_tokens == 0
    assert backend.resident() == [large]
    assert closed.stats.draft_rule == "" and closed.stats.drafted_tokens == 0
