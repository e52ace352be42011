"""What answers cost and whether the next fits a task's spend limit: pure functions."""

from __future__ import annotations

import pytest

from swapos.policies.spending import (
    PREFILL_SHARE,
    UNMEASURED,
    ModelCost,
    Spend,
    affordable,
    generation_cost,
    spend_limit,
)

LARGE = ModelCost(ms_per_token=72.0, prefill_ms_per_token=4.0)
TOKENS = ModelCost(ms_per_token=1.0, prefill_ms_per_token=PREFILL_SHARE)  # costs in tokens


def test_a_generation_costs_its_tokens_and_its_prefill_at_the_models_costs() -> None:
    assert generation_cost(LARGE, tokens=10, prefilled=100) == 10 * 72.0 + 100 * 4.0
    unit = UNMEASURED.ms_per_token
    assert (
        generation_cost(UNMEASURED, tokens=10, prefilled=160) == (10 + 160 * PREFILL_SHARE) * unit
    )


def test_the_next_answer_is_expected_to_cost_the_mean_of_those_it_repeats() -> None:
    spend = Spend().add(100.0, 100, 0).add(300.0, 300, 0)
    assert spend.answers == 2 and spend.cost == 400.0
    assert spend.expected(TOKENS) == 200.0  # 200 tokens on average
    assert spend.expected(LARGE) == 200 * 72.0  # the same answer from a dearer model
    assert Spend().expected(LARGE) == 0.0


@pytest.mark.parametrize(
    ("spent", "expected", "limit", "fits"),
    [
        # (first answer's cost, multiple, seconds) -> the limit
        (100.0, 100.0, (100.0, 2.0, 0.0), True),  # exactly at the limit
        (100.0, 101.0, (100.0, 2.0, 0.0), False),
        (10_000.0, 10_000.0, (100.0, 0.0, 0.0), True),  # no limit
        (0.0, 50.0, (0.0, 2.0, 0.0), True),  # before a first answer
        (50_000.0, 10_000.0, (100.0, 0.0, 60.0), True),  # 60 s
        (50_000.0, 10_001.0, (100.0, 0.0, 60.0), False),
        (150.0, 100.0, (100.0, 2.0, 60.0), False),  # the smaller limit holds
    ],
)
def test_a_next_answer_fits_while_spent_plus_expected_is_within_the_limit(
    spent: float, expected: float, limit: tuple[float, float, float], fits: bool
) -> None:
    first, multiple, seconds = limit
    cap = spend_limit(first=first, multiple=multiple, seconds=seconds)
    assert affordable(spent=spent, expected=expected, limit=cap) is fits


def test_a_limit_allows_many_cheap_draws_and_few_dear_ones() -> None:
    def draws_allowed(tokens: int, limit: float = 4.0) -> int:
        spend, n = Spend().add(float(tokens), tokens, 0), 0
        cap = spend_limit(first=tokens, multiple=limit, seconds=0.0)
        while affordable(spent=spend.cost, expected=spend.expected(TOKENS), limit=cap):
            spend, n = spend.add(float(tokens), tokens, 0), n + 1
        return n

    assert draws_allowed(20) == draws_allowed(400) == 3  # relative to the first answer
    first, draws = Spend().add(20.0, 20, 0), Spend().add(400.0, 400, 0)  # a body, then a file
    cap = spend_limit(first=20.0, multiple=4.0, seconds=0.0)
    assert not affordable(spent=first.cost + draws.cost, expected=400.0, limit=cap)
