"""The side-by-side draws policy, row by row (the rules are ``policies/draws.py``'s docstring)."""

from __future__ import annotations

import pytest

from swapos.policies.draws import batch_cost, context_room, expected_cost, plan_draws

QWEN_05B = {2: 3.12, 4: 3.79, 6: 4.14, 8: 3.86}  # issue 26, measured on this 2-core CPU
QWEN_15B = {2: 2.35, 4: 2.72, 8: 3.33, 12: 3.75}
GPU = {2: 1.02, 4: 1.05, 8: 1.1}


@pytest.mark.parametrize(
    ("draws", "curve", "pass_rate", "room", "chosen"),
    [
        (6, QWEN_05B, 0.0, None, 6),  # x4.14 for six tokens against x6 in turn
        (6, QWEN_05B, 0.1, None, 6),  # 4.14 against 4.69 expected in turn
        (6, QWEN_05B, 0.3, None, 1),  # a likely early pass makes in turn cheaper (2.94)
        (6, QWEN_15B, 0.0, None, 6),  # x3.03 (interpolated between 4 and 8)
        (6, QWEN_15B, 0.0, 3, 3),  # room for 3: two groups of x2.54
        (6, QWEN_15B, 0.0, 2, 1),  # room for 2: three groups of x2.35 cost more than 6
        (6, GPU, 0.0, None, 6),
        (6, GPU, 0.5, None, 6),  # a flat curve pays even when the first draw likely passes
        (6, {2: 3.12, 4: 3.79}, 0.0, None, 1),  # 5 and 6 not measured: 4+2 costs 6.91 > 6
        (6, {}, 0.0, None, 1),  # nothing measured
        (1, GPU, 0.0, None, 1),  # one draw
        (2, {2: 1.95}, 0.0, None, 1),  # saves 2.5%, under the margin
        (4, {2: 1.0, 4: 2.0}, 0.0, None, 2),  # 2 groups of 2 tie with 1 of 4: the smaller
    ],
)
def test_plan_draws_rules(
    draws: int, curve: dict[int, float], pass_rate: float, room: int | None, chosen: int
) -> None:
    plan = plan_draws(draws, curve, pass_rate=pass_rate, room=room)
    assert plan.side_by_side == chosen
    assert plan.expected_cost <= plan.in_turn_cost
    assert plan.reason.startswith("in turn" if chosen == 1 else f"{chosen} side by side")


@pytest.mark.parametrize(
    ("k", "cost"),
    [(1, 1.0), (2, 3.12), (3, 3.455), (6, 4.14), (7, 4.0), (8, 3.86), (9, None)],
)
def test_batch_cost_interpolates_between_measured_sizes_and_not_past_them(
    k: int, cost: float | None
) -> None:
    assert batch_cost(QWEN_05B, k) == (pytest.approx(cost) if cost is not None else None)


def test_expected_cost_weights_each_group_by_the_chance_every_earlier_draw_failed() -> None:
    assert expected_cost(6, 1, 1.0, 1.0, 0.0) == 6
    assert expected_cost(6, 4, 3.79, 3.12, 0.5) == pytest.approx(3.79 + 0.5**4 * 3.12)
    assert expected_cost(6, 1, 1.0, 1.0, 0.3) == pytest.approx((1 - 0.7**6) / 0.3)


@pytest.mark.parametrize(
    ("prompt", "max_tokens", "n_ctx", "room"),
    [
        (1500, 512, 4096, 5),  # 1500 + 5 x 511 <= 4096 < 1500 + 6 x 511
        (100, 1, 4096, 1),  # a draw of one token evaluates none: no bound but one
        (4000, 512, 4096, 1),  # the context is nearly full: one draw, in turn
        (0, 4097, 4096, 1),  # a draw may fill the whole context
    ],
)
def test_the_draws_context_never_holds_more_cells_than_the_models_own(
    prompt: int, max_tokens: int, n_ctx: int, room: int
) -> None:
    assert context_room(prompt, max_tokens, n_ctx) == room
