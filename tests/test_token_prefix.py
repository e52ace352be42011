"""The one common-prefix rule the KV tiers, the Generator and the backends share."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from swapos.policies.tokens import common_prefix_len

tokens = st.lists(st.integers(min_value=0, max_value=3), max_size=40)


@given(tokens, tokens)
def test_common_prefix_len_counts_the_leading_tokens_both_share(a: list[int], b: list[int]) -> None:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    assert common_prefix_len(a, b) == n == common_prefix_len(b, a)
    assert common_prefix_len(tuple(a), b) == n  # any sequences


def test_common_prefix_len_of_long_prompts() -> None:
    prompt = list(range(5000))
    assert common_prefix_len(prompt, [*prompt[:4321], -1, *prompt[4322:]]) == 4321
    assert common_prefix_len(prompt, prompt[:10]) == 10
    assert common_prefix_len([], prompt) == 0
