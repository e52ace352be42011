"""The rule for a small resident model drafting for a large one (pure, no models)."""

from __future__ import annotations

from swapos.policies.model_drafts import (
    PRIOR_ACCEPTANCE,
    Drafter,
    choose_model_draft,
    draft_length,
    drafter_acceptance,
    pick_drafter,
)

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


GPU = (1.0, 1.02, 1.04, 1.06, 1.08, 1.1, 1.12, 1.14, 1.16)


def drafter(name: str, **kw: object) -> Drafter:
    base: dict[str, object] = {
        "name": name, "same_vocabulary": True, "step_s": 0.003, "prefill_s_per_token": 0.0005,
    }  # fmt: skip
    base.update(kw)
    return Drafter(**base)  # type: ignore[arg-type]


def test_the_cheapest_measured_drafter_with_the_same_vocabulary_is_picked() -> None:
    drafters = [
        drafter("other-vocab", same_vocabulary=False, step_s=0.001),
        drafter("unmeasured", step_s=0.0),
        drafter("slow", step_s=0.008),
        drafter("fast", step_s=0.002),
    ]
    picked = pick_drafter(
        drafters, target_step_s=0.02, verify_ratio=GPU, tokens=400, prompt_tokens=1000
    )
    assert picked is not None and picked[0].name == "fast" and picked[1].length > 1


def test_no_drafter_on_this_cpu_or_without_the_targets_walls() -> None:
    cpu = drafter("small", step_s=0.0485, prefill_s_per_token=0.002)
    kw = {"verify_ratio": CPU_CURVE, "tokens": 400, "prompt_tokens": 500}
    assert pick_drafter([cpu], target_step_s=0.0582, **kw) is None  # type: ignore[arg-type]
    assert pick_drafter([drafter("fast")], target_step_s=0.0, **kw) is None  # type: ignore[arg-type]


def test_a_pinned_length_takes_the_first_same_vocabulary_drafter_whatever_it_costs() -> None:
    drafters = [drafter("gemma", same_vocabulary=False), drafter("qwen", step_s=0.0)]
    picked = pick_drafter(
        drafters, target_step_s=0.0, verify_ratio=(), tokens=64, prompt_tokens=10, pinned=4
    )
    assert picked is not None and picked[0].name == "qwen" and picked[1].length == 4
    none = pick_drafter(drafters, target_step_s=0.02, verify_ratio=GPU, tokens=64,
                        prompt_tokens=10, pinned=0)  # fmt: skip
    assert none is None


def test_a_drafter_whose_drafts_are_rejected_stops_drafting() -> None:
    kw = {"target_step_s": 0.02, "verify_ratio": GPU, "tokens": 300}
    fresh = drafter("small")
    assert draft_length(fresh, **kw) > 0  # type: ignore[arg-type]
    assert drafter_acceptance(fresh) == PRIOR_ACCEPTANCE
    rejected = drafter("small", accepted=2, tested=60)
    assert drafter_acceptance(rejected) < 0.2
    assert draft_length(rejected, **kw) == 0  # type: ignore[arg-type]
    assert draft_length(rejected, pinned=3, **kw) == 3  # type: ignore[arg-type]
