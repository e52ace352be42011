"""The rule for a small resident model drafting for a large one (pure, no models)."""

from __future__ import annotations

from swapos.policies.model_drafts import choose_model_draft

# bench decode on this 2-core machine (docs/benchmarks.md, "Decode"): the 1.5B's curve,
# filled between the measured sizes 2, 4, 8, 12, and the 0.5B's step over the 1.5B's
CPU_CURVE = (1.0, 1.70, 2.075, 2.45, 2.7575, 3.065, 3.3725, 3.68, 3.61, 3.54, 3.47, 3.40)
CPU_DRAFT_STEP = 48.5 / 58.2


def test_on_this_cpu_a_draft_model_never_pays_even_if_every_token_is_accepted() -> None:
    got = choose_model_draft(
        same_vocabulary=True, resident=True, draft_step=CPU_DRAFT_STEP,
        verify_ratio=CPU_CURVE, acceptance=1.0, tokens=500,
    )  # fmt: skip
    assert got.length == 0 and got.reason == "no length pays"


def test_a_flat_curve_and_a_cheap_drafter_pay_and_the_prompt_counts() -> None:
    gpu = (1.0, 1.02, 1.04, 1.06, 1.08, 1.1, 1.12, 1.14, 1.16)
    kw = {"same_vocabulary": True, "resident": True, "verify_ratio": gpu, "tokens": 400}
    got = choose_model_draft(draft_step=0.15, acceptance=0.7, **kw)
    assert got.length > 1 and got.drafted_cost < 0.95 * got.plain_cost
    # the same draft model, if it has to read a long prompt slowly first, does not pay
    slow = choose_model_draft(
        draft_step=0.15, acceptance=0.7, prompt_tokens=4000, prefill_step=0.1, **kw
    )
    assert slow.length == 0


def test_never_from_another_vocabulary_or_a_model_that_is_not_resident() -> None:
    gpu = (1.0, 1.0, 1.0, 1.0)
    kw = {"draft_step": 0.1, "verify_ratio": gpu, "acceptance": 0.9, "tokens": 100}
    assert choose_model_draft(same_vocabulary=False, resident=True, **kw).length == 0
    assert choose_model_draft(same_vocabulary=True, resident=False, **kw).length == 0
    assert choose_model_draft(same_vocabulary=True, resident=True, **kw).length == 3
