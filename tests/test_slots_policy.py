"""The slots policy, row by row (the rules are ``policies/slots.py``'s docstring)."""

from __future__ import annotations

import pytest

from swapos.policies.slots import (
    MAX_PINNED,
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
