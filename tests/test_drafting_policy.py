"""The drafting policy (policies/drafting.py), rule by rule, without a model."""

from __future__ import annotations

import pytest

from swapos.data.generation import DraftCosts, DraftRequest
from swapos.policies.drafting import (
    MARGIN,
    DraftPolicy,
    DraftRule,
    NgramIndex,
    choose_length,
    estimate_acceptance,
    expected_tokens,
    lookup,
    replay,
)

# Cost curves shaped like the ones measured on this 2-core machine (issue 26 gives the 2, 4, 8
# and 12-token points; the rest are filled in between): a K-token batch over one token.
CURVE_15B = (1.0, 2.35, 2.5, 2.72, 2.9, 3.0, 3.1, 3.2, 3.33, 3.4, 3.5, 3.6, 3.75)
CURVE_05B = (1.0, 3.12, 3.5, 3.79, 4.0, 4.14, 4.0, 3.9, 3.86)
FLAT = (1.0,) + (1.05,) * 12  # a GPU-like curve: a batch costs about one token
GOOD = DraftCosts(verify_ratio=FLAT, default_acceptance=0.9)


# Rule 1: lookup -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("history", "rule", "draft"),
    [
        # the latest earlier occurrence of the last 3 tokens drafts what followed it
        ([1, 2, 3, 4, 5, 9, 1, 2, 3], DraftRule(k=4), [4, 5, 9, 1]),
        # the cap k
        ([1, 2, 3, 4, 5, 9, 1, 2, 3], DraftRule(k=2), [4, 5]),
        # the longest match wins over a later shorter one
        ([7, 3, 4, 8, 3, 4, 7, 3], DraftRule(k=2), [4, 8]),
        # with no 3- or 2-gram match, a 1-gram one
        ([5, 6, 9, 9, 5], DraftRule(k=3), [6, 9, 9]),
        # ...unless the rule needs at least 2
        ([5, 6, 9, 9, 5], DraftRule(ngram_min=2, k=3), []),
        # the latest occurrence, not the first
        ([4, 1, 4, 2, 4], DraftRule(ngram_max=1, k=1), [2]),
        # the suffix never matches itself
        ([1, 2, 3], DraftRule(k=4), []),
        # k = 0 never drafts
        ([1, 2, 1, 2], DraftRule(k=0), []),
    ],
)
def test_lookup_drafts_what_followed_the_latest_longest_match(
    history: list[int], rule: DraftRule, draft: list[int]
) -> None:
    index = NgramIndex(history, ngram_max=rule.ngram_max)
    assert lookup([index], history, rule) == draft


def test_lookup_tries_the_prediction_before_the_history() -> None:
    history = NgramIndex([1, 2, 3, 1, 2])
    prediction = NgramIndex([0, 1, 2, 7, 7])
    assert lookup([prediction, history], history.tokens, DraftRule(k=2)) == [7, 7]
    assert lookup([history], history.tokens, DraftRule(k=2)) == [3, 1]


def test_index_grows_token_by_token_like_a_batch_build() -> None:
    tokens = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]
    grown = NgramIndex()
    for t in tokens:
        grown.append(t)
    whole = NgramIndex(tokens)
    for n in (1, 2, 3):
        assert grown.follow(tokens[-n:], 4) == whole.follow(tokens[-n:], 4)


# Rules 2 and 4: yield and length ---------------------------------------------------------


@pytest.mark.parametrize(
    ("acceptance", "d", "tokens"),
    [(0.0, 4, 1.0), (1.0, 4, 5.0), (0.5, 2, 1.75), (0.9, 0, 1.0)],
)
def test_expected_tokens_is_the_geometric_sum(acceptance: float, d: int, tokens: float) -> None:
    assert expected_tokens(acceptance, d) == pytest.approx(tokens)


@pytest.mark.parametrize(
    ("curve", "acceptance", "available", "length"),
    [
        # the 0.5B here: at the fixes' acceptance no draft pays (a 2-token batch costs 3.12
        # single steps)...
        (CURVE_05B, 0.7, 8, 0),
        (CURVE_05B, 0.95, 1, 0),
        # ...but a near-verbatim rewrite does
        (CURVE_05B, 0.95, 8, 8),
        # the 1.5B here: long drafts pay on file rewrites (the best yield per cost, not the
        # longest: the 12th token costs more than it is expected to yield)...
        (CURVE_15B, 0.85, 12, 11),
        # ...not on low acceptance
        (CURVE_15B, 0.5, 12, 0),
        # never longer than the lookup found
        (CURVE_15B, 0.95, 3, 3),
        # nor than the curve was measured
        (CURVE_15B[:5], 0.95, 12, 4),
        # a flat curve pays for all of a draft even at a modest acceptance, not for none
        (FLAT, 0.3, 8, 8),
        (FLAT, 0.04, 8, 0),
        # no draft found: a plain step
        (FLAT, 0.9, 0, 0),
    ],
)
def test_length_is_the_best_yield_per_cost_or_zero(
    curve: tuple[float, ...], acceptance: float, available: int, length: int
) -> None:
    assert choose_length(curve, acceptance, available) == length


def test_a_draft_that_barely_pays_is_not_taken() -> None:
    curve = (1.0, 1.5 / (1 + MARGIN))  # at acceptance 0.5 the gain is exactly 1 + MARGIN
    assert choose_length(curve, 0.5 - 1e-6, 1) == 0
    assert choose_length(curve, 0.5 + 1e-3, 1) == 1


# Rule 5: running acceptance ------------------------------------------------------------


def test_running_acceptance_moves_from_the_prior_towards_what_is_seen() -> None:
    assert estimate_acceptance(0.8, 0, 0) == pytest.approx(0.8)
    assert estimate_acceptance(0.8, 0, 16) == pytest.approx(0.4)
    assert estimate_acceptance(0.8, 160, 160) > 0.98


def test_a_phase_whose_drafts_fail_stops_drafting() -> None:
    costs = DraftCosts(verify_ratio=CURVE_15B, acceptance={"fix": 0.85})
    policy = DraftPolicy(costs, DraftRequest(kind="fix"))
    assert policy.length(12) == 11
    for _ in range(8):
        policy.observe(12, 0)  # each verification: first token rejected
    assert policy.length(12) == 0


def test_free_shadow_checks_let_a_phase_start_drafting() -> None:
    costs = DraftCosts(verify_ratio=CURVE_15B, acceptance={"fix": 0.3})
    policy = DraftPolicy(costs, DraftRequest(kind="fix"))
    assert policy.length(12) == 0
    for _ in range(200):
        policy.observe_unverified(5, 5)
    assert policy.length(12) > 0


@pytest.mark.parametrize(
    ("costs", "request_", "active", "length"),
    [
        # no measured costs: never
        (None, None, False, 0),
        # no measured costs, a pinned length: that length
        (None, DraftRequest(max_draft=4), True, 4),
        # a pinned 0: never, whatever the costs
        (GOOD, DraftRequest(max_draft=0), False, 0),
        # an unmeasured kind takes the default acceptance
        (DraftCosts(verify_ratio=FLAT, default_acceptance=0.0), DraftRequest(kind="x"), True, 0),
        (GOOD, DraftRequest(kind="x"), True, 8),
    ],
)
def test_policy_table(
    costs: DraftCosts | None, request_: DraftRequest | None, active: bool, length: int
) -> None:
    policy = DraftPolicy(costs, request_)
    assert policy.active is active
    assert policy.length(8) == length


# Replay ------------------------------------------------------------------------------------


def test_replaying_a_copy_takes_few_steps_and_prices_them_on_the_curve() -> None:
    code = list(range(100, 140))
    out = replay([1, 2, *code, 3], code, DraftRule(k=8))
    # the first token has no match (a plain step); then each batch of 8 drafts is accepted
    assert out.tokens == 40
    assert out.steps < 8
    assert out.acceptance > 0.9
    assert out.tokens_per_step > 5
    assert out.cost((1.0,) * 13) == out.steps
    assert out.cost(CURVE_05B) > out.cost(CURVE_15B[:9]) > out.steps


def test_replaying_new_text_is_plain_decoding() -> None:
    out = replay([1, 2, 3], [7, 8, 9, 10], DraftRule(k=8))
    assert (out.steps, out.drafted, out.accepted) == (4, 0, 0)
    assert out.batches[0] == 4
