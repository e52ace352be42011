"""Draws side by side at the backend: the fake on the clock, and the one sampler shared with
the decode loop in turn (no model loaded)."""

from __future__ import annotations

import ctypes
import functools

import anyio
import llama_cpp
import numpy as np
import pytest

from swapos.backends.base import DrawOutput, DrawsModel
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_model import FakeModel
from swapos.backends.fake_script import FakeModelScript
from swapos.backends.llama.decode import Decoder
from swapos.backends.llama.handles import Handles
from swapos.backends.llama.parallel import draws_context_cells
from swapos.backends.llama.sampling import sample_logits
from swapos.data.sampling import SamplingParams
from swapos.models.spec import ModelSpec
from swapos.testing import FakeClock

REPLIES = ("a b c d e f", "one two", "x y z END tail", "p q r s")


async def _model(clock: FakeClock, **script: object) -> FakeModel:
    scripts = {"m": FakeModelScript(replies=REPLIES, token_s=0.1, load_s=0.0, **script)}  # type: ignore[arg-type]
    return await FakeBackend(clock, scripts).load(ModelSpec(name="m", path="/dev/null"))


def _params(n: int, max_tokens: int = 8) -> list[SamplingParams]:
    return [
        SamplingParams(max_tokens=max_tokens, temperature=0.8, seed=i, stop=("END",))
        for i in range(n)
    ]


async def test_fake_draws_side_by_side_say_what_the_same_draws_say_in_turn() -> None:
    params = [*_params(4, max_tokens=5), SamplingParams(max_tokens=0)]
    with anyio.fail_after(5):
        clock = FakeClock()
        async with clock.autojump():
            turn_model = await _model(clock)
            turn = [await turn_model.generate([1, 2, 3], p) for p in params]
            side_model = await _model(clock)
            assert isinstance(side_model, DrawsModel)
            side = await side_model.generate_draws([1, 2, 3], params)
    by = {d.index: d.output for d in side}
    assert [by[i].text for i in range(5)] == [o.text for o in turn]
    assert [by[i].stats.stop_reason for i in range(5)] == [o.stats.stop_reason for o in turn]
    assert [by[i].stats.tokens for i in range(5)] == [o.stats.tokens for o in turn]
    assert [by[i].read for i in range(5)] == [o.read for o in turn]
    assert [o.stats.stop_reason for o in turn] == ["length", "eos", "stop", "eos", "length"]


async def test_fake_draws_finish_in_lockstep_at_the_scripted_step_cost() -> None:
    # 4 draws of 5, 2, 4 (stop at END) and 4 tokens: steps of 4, 4, 3, 3, 1 draws.
    costs = (1.0, 1.5, 2.0, 2.5)
    with anyio.fail_after(5):
        clock = FakeClock()
        async with clock.autojump():
            model = await _model(clock, draw_step_cost=costs)
            ends: list[tuple[int, float]] = []
            t0 = clock.now()
            await model.generate_draws(
                [1], _params(4, max_tokens=5), on_draw=lambda d: ends.append((d.index, clock.now()))
            )
    step = [0.25, 0.25, 0.2, 0.2, 0.1]  # 0.1 s x cost of the draws still running
    at = t0 + np.cumsum(step)
    assert [i for i, _ in ends] == [1, 2, 3, 0]
    assert [t for _, t in ends] == pytest.approx([at[1], at[3], at[3], at[4]])


async def test_fake_draws_stop_drops_the_draws_still_running() -> None:
    with anyio.fail_after(5):
        clock = FakeClock()
        async with clock.autojump():
            model = await _model(clock)
            seen: list[DrawOutput] = []
            out = await model.generate_draws(
                [1], _params(4), on_draw=seen.append, stop=lambda: bool(seen)
            )
            assert clock.now() == pytest.approx(0.2)  # the first ends after 2 steps
    assert [d.index for d in out] == [1] == [d.index for d in seen]
    assert out[0].output.text == "one two"


async def test_fake_draws_cancelled_mid_step_stop_within_the_step() -> None:
    with anyio.fail_after(5):
        clock = FakeClock()
        async with clock.autojump():
            model = await _model(clock)
            seen: list[DrawOutput] = []
            draw = functools.partial(model.generate_draws, [1], _params(4), on_draw=seen.append)
            async with anyio.create_task_group() as tg:
                tg.start_soon(draw)
                await clock.sleep(0.15)
                tg.cancel_scope.cancel()
            assert clock.now() == pytest.approx(0.15)
    assert seen == []  # the first would have ended at 0.2


@pytest.mark.parametrize(
    ("prompt", "max_tokens", "n_ctx", "cells"),
    [
        (100, [50, 50, 50], 4096, 100 + 3 * 49),
        (100, [1, 1], 4096, 100),  # a one-token draw evaluates nothing
        (4000, [512, 512], 4096, 4000 + 2 * 96),  # never past n_ctx, as in turn
        (10, [], 4096, 10),
    ],
)
def test_draws_context_holds_the_prompt_once_and_each_draws_evaluated_tokens(
    prompt: int, max_tokens: list[int], n_ctx: int, cells: int
) -> None:
    assert draws_context_cells(prompt, max_tokens, n_ctx) == cells


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=0.8, seed=3),
        SamplingParams(temperature=1.3, seed=7, top_k=0, top_p=1.0),
        SamplingParams(temperature=0.5, seed=11, top_k=5, top_p=0.5),
    ],
)
def test_side_by_side_sampler_is_the_decode_loops_sampler(
    params: SamplingParams, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decode loop in turn and the draws decoder pick the same token from the same row
    with the same generator state (what makes a draw's text the same either way)."""
    n_vocab = 300
    rows = np.random.default_rng(0).normal(size=(20, n_vocab)).astype(np.float32) * 4
    current = (ctypes.c_float * n_vocab)()
    monkeypatch.setattr(
        llama_cpp,
        "llama_get_logits_ith",
        lambda _ctx, _i: ctypes.cast(current, ctypes.POINTER(ctypes.c_float)),
    )
    handles = Handles(
        name="m", model=None, ctx=None, vocab=None, n_vocab=n_vocab, n_ctx=64, n_batch=8
    )
    decoder = Decoder(handles, abort=None, emit=None, started=0.0)  # type: ignore[arg-type]
    turn_rng, side_rng = np.random.default_rng(params.seed), np.random.default_rng(params.seed)
    for row in rows:
        ctypes.memmove(current, row.ctypes.data, row.nbytes)
        assert decoder._sample(params, turn_rng, -1) == sample_logits(row, params, side_rng)
