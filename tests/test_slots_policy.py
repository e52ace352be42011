"""The slots policy, row by row (the rules are ``policies/slots.py``'s docstring)."""

from __future__ import annotations

import pytest

from swapos.policies.slots import (
    MAX_PINNED,
    budget_caps,
    plan_slots,
    predicted_speedup,
    resolve_slots,
    step_width,
    throughput,
)

QWEN_05B = {2: 3.12, 4: 3.79, 6: 4.14, 8: 3.86}  # issue 26, measured on this 2-core CPU
QWEN_15B = {2: 1.55, 4: 2.00, 8: 2.99, 12: 3.12}  # docs/results/log 2026-12-02
GPU = {2: 1.02, 4: 1.05, 8: 1.1}


@pytest.mark.parametrize(
    ("curve", "cap", "chosen"),
    [
        ({}, 4, 1),  # rule 1: nothing measured
        (QWEN_15B, 4, 4),  # x2.00 at 4 against x1.69 at 3
        (QWEN_15B, 8, 7),  # x2.55 at 7; 8 adds under 5 % (x2.68)
        (GPU, 4, 4),
        (GPU, 16, 8),  # rule 2: nothing past the largest size measured
        (QWEN_05B, 4, 4),  # a batch of 2 loses (x0.64); 4 just pays (x1.06)
        (QWEN_05B, 3, 1),  # 2 and 3 never pay on this curve
        ({2: 1.0, 4: 3.9}, 4, 2),  # rule 3: 4 adds under 5 % over 2 (x1.03 vs x2.00)
    ],
)
def test_plan_slots_rules(curve: dict[int, float], cap: int, chosen: int) -> None:
    plan = plan_slots(curve, cap=cap)
    assert plan.slots == chosen
    assert plan.reason.startswith(f"{chosen} slot")
    if chosen > 1:
        assert plan.throughput == pytest.approx(throughput(curve, chosen))


def test_a_pin_wins_over_the_curve_and_is_bounded() -> None:
    assert resolve_slots(0, QWEN_15B) == 4
    assert resolve_slots(0, {}) == 1
    assert resolve_slots(2, QWEN_15B) == 2
    assert resolve_slots(3, {}) == 3
    assert resolve_slots(10_000, {}) == MAX_PINNED


def test_each_step_decodes_only_as_many_as_pay() -> None:
    assert step_width(QWEN_05B, 2) == 1  # two side by side would be slower than in turn
    assert step_width(QWEN_05B, 4) == 4
    assert step_width(QWEN_15B, 3) == 3
    assert step_width({}, 5) == 5  # pinned, nothing measured: all of them
    assert step_width(QWEN_15B, 1) == 1


def test_the_prediction_is_the_throughput_of_the_requests_side_by_side() -> None:
    assert predicted_speedup(QWEN_15B, 1, 4) == pytest.approx(1.0)
    assert predicted_speedup(QWEN_15B, 2, 4) == pytest.approx(2 / 1.55)
    assert predicted_speedup(QWEN_15B, 8, 4) == pytest.approx(2.0)  # 4 slots: 4 at once
    assert predicted_speedup(QWEN_05B, 2, 8) == pytest.approx(1.0)  # never below in turn
    assert predicted_speedup({}, 4, 4) is None


@pytest.mark.parametrize(
    ("sizes", "room", "fixed", "caps"),
    [
        # one model: as many slots as fit the budget (1574 MiB at 4 does not fit 1479 MiB)
        ({"large": [1238, 1350, 1462, 1574]}, 1479, 0, {"large": 3}),
        ({"large": [1238, 1350, 1462, 1574]}, 4096, 0, {"large": 4}),
        # too big at one slot: one (its load fails, saying why)
        ({"large": [1238, 1350]}, 1000, 0, {"large": 1}),
        # two that fit together at one slot share what is left equally: 300 each
        ({"a": [500, 600, 700, 800], "b": [400, 750, 1100]}, 1500, 0, {"a": 4, "b": 1}),
        ({"a": [500, 600, 700, 800], "b": [400, 500, 600]}, 1500, 0, {"a": 4, "b": 3}),
        # a pinned model's bytes come off the room first: 100 left to share
        ({"a": [500, 600, 700, 800]}, 1500, 900, {"a": 2}),
        # two that do not fit together (they swap anyway): each up to the whole budget
        ({"a": [900, 1000, 1100], "b": [800, 1200, 1600]}, 1500, 0, {"a": 3, "b": 2}),
        # a file that could not be read: one slot
        ({"a": []}, 1500, 0, {"a": 1}),
    ],
)
def test_the_budget_caps_the_slots(
    sizes: dict[str, list[int]], room: int, fixed: int, caps: dict[str, int]
) -> None:
    assert budget_caps(sizes, room, fixed=fixed) == caps


def test_a_capped_plan_takes_the_best_count_under_the_cap() -> None:
    assert plan_slots(QWEN_15B, cap=3).slots == 3
    assert plan_slots(QWEN_05B, cap=3).slots == 1  # under the cap, 2 and 3 never pay
