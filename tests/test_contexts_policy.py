"""The context policy: fits, load or reload with a grown context, or refuse (the rows of
``swapos/policies/contexts.py``'s table, in its order)."""

from __future__ import annotations

import pytest

from swapos.policies.contexts import (
    ContextStep,
    Fits,
    LoadWith,
    Refuse,
    context_step,
    grown,
    needed_context,
    refusal_text,
    within_budget,
)


@pytest.mark.parametrize(
    ("need", "prompt", "loaded", "start", "cap", "step"),
    [
        # the prompt alone fills the cap: refused with both numbers
        (40_000, 33_000, None, 4096, 32768, Refuse(prompt_tokens=33_000, most=32768)),
        (40_000, 32768, 4096, 4096, 32768, Refuse(prompt_tokens=32768, most=32768)),
        (3000, 2048, 2048, 2048, 2048, Refuse(prompt_tokens=2048, most=2048)),
        # loaded with enough: fits (a smaller need never shrinks it)
        (3000, 2000, 4096, 4096, 32768, Fits(n_ctx=4096)),
        (4096, 2000, 4096, 4096, 32768, Fits(n_ctx=4096)),
        (100, 50, 16384, 4096, 32768, Fits(n_ctx=16384)),
        # a need past the cap, on a model loaded at its cap: fits (the answer is cut to fit)
        (40_000, 30_000, 32768, 4096, 32768, Fits(n_ctx=32768)),
        # not loaded: the start, or the grown need when that is more
        (100, 50, None, 4096, 32768, LoadWith(n_ctx=4096, reload=False)),
        (5000, 4000, None, 4096, 32768, LoadWith(n_ctx=8192, reload=False)),
        (9000, 100, None, 4096, 10_000, LoadWith(n_ctx=10_000, reload=False)),
        (100, 50, None, 2048, 2048, LoadWith(n_ctx=2048, reload=False)),
        # loaded with less: reload with the grown need, at most the cap
        (4097, 3000, 4096, 4096, 32768, LoadWith(n_ctx=8192, reload=True)),
        (20_000, 19_000, 4096, 4096, 32768, LoadWith(n_ctx=32768, reload=True)),
        (40_000, 30_000, 8192, 4096, 32768, LoadWith(n_ctx=32768, reload=True)),
        (9000, 8000, 4096, 4096, 10_000, LoadWith(n_ctx=10_000, reload=True)),
        # the Loader asks with the need alone (prompt_tokens 0: checked by the server)
        (12_000, 0, 8192, 4096, 32768, LoadWith(n_ctx=16384, reload=True)),
    ],
)
def test_context_steps(  # noqa: PLR0917
    need: int, prompt: int, loaded: int | None, start: int, cap: int, step: ContextStep
) -> None:
    assert context_step(need, prompt_tokens=prompt, loaded=loaded, start=start, cap=cap) == step


@pytest.mark.parametrize(
    ("need", "cap", "size"),
    [(1, 4096, 1), (1000, 4096, 1024), (1024, 4096, 1024), (1025, 4096, 2048),
     (5000, 32768, 8192), (5000, 6000, 6000), (40_000, 32768, 32768)],
)  # fmt: skip
def test_a_grown_context_is_a_power_of_two_at_most_the_cap(need: int, cap: int, size: int) -> None:
    assert grown(need, cap=cap) == size


@pytest.mark.parametrize(
    ("prompt", "answer", "num_ctx", "need"),
    [(100, 50, None, 150), (100, 50, 8192, 8192), (9000, 1024, 8192, 10_024), (10, -1, None, 10)],
)
def test_a_request_needs_its_prompt_and_answer_or_its_num_ctx(
    prompt: int, answer: int, num_ctx: int | None, need: int
) -> None:
    assert needed_context(prompt, answer, num_ctx) == need


def test_a_refusal_names_both_numbers_and_what_to_do() -> None:
    text = refusal_text(Refuse(prompt_tokens=40_000, most=32768), model="m", field="messages")
    assert "maximum context length is 32768 tokens" in text
    assert "the prompt has 40000 tokens" in text
    assert "Shorten the messages" in text and "raise n_ctx" in text


@pytest.mark.parametrize(
    ("step", "need", "start", "most", "result"),
    [
        # the grown context fits: kept
        (LoadWith(n_ctx=16384, reload=True), 12_000, 4096, 16384, 16384),
        # it does not, the need does: the need (a reload stays a reload)
        (LoadWith(n_ctx=16384, reload=True), 12_000, 4096, 14_000, 12_000),
        (LoadWith(n_ctx=8192, reload=False), 5000, 4096, 6000, 5000),
        # the need is under the start: the start, where it fits
        (LoadWith(n_ctx=8192, reload=False), 3000, 4096, 6000, 4096),
        # nothing smaller fits either: the grown one, for the Loader to refuse
        (LoadWith(n_ctx=16384, reload=True), 12_000, 4096, 10_000, 16384),
        # the need is the grown context: nothing smaller to try
        (LoadWith(n_ctx=8192, reload=True), 8192, 4096, 6000, 8192),
    ],
)
def test_a_grown_context_the_budget_cannot_hold_falls_back_to_the_need(
    step: LoadWith, need: int, start: int, most: int, result: int
) -> None:
    fitted = within_budget(step, need, start=start, fits=lambda n_ctx: n_ctx <= most)
    assert fitted == LoadWith(n_ctx=result, reload=step.reload)
