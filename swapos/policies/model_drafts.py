"""When a small resident model would pay as the drafter of a large one: the rule alone.

Prompt-lookup drafting (:mod:`swapos.policies.drafting`) drafts for free: the draft is a
copy of earlier tokens. A *draft model* costs its own decode steps: to propose ``d`` tokens
it runs ``d`` steps of its own, each ``draft_step`` of one target step (the two models'
measured one-token walls, ``bench decode``), and before that it must have read the prompt
(``prefill_step`` of a target step per prompt token it does not hold). The target then
verifies the ``d`` tokens in one batch (``verify_ratio[d]``) and keeps the agreed prefix and
its own next token, ``1 + a + ... + a**d`` tokens at per-token acceptance ``a``.

The rules, written once here (:func:`choose_model_draft`):

1. Only a model that is resident and shares the target's vocabulary (its token table is the
   same, checked, never assumed from names) may draft; a draft is never a reason to load or
   keep a model.
2. Per token, drafting ``d`` costs ``(d * draft_step + verify_ratio[d]) / yield(a, d)``
   target steps against 1 for a plain step; the best ``d`` wins if, over ``tokens`` answer
   tokens and with the prompt's prefill on the draft model added, it saves :data:`MARGIN`
   of the plain cost. Otherwise 0: the target decodes alone.

On the 2-core CPU this was written on it never pays: the 0.5B's step is 0.83 of the 1.5B's
(48.5 against 58.2 ms, ``docs/benchmarks.md``), so even with every drafted token accepted the
best yield per cost is below a plain step (``tests/test_model_drafts.py``). A GPU's flat
curve and a small drafter's cheap step are where it pays; the decode loop does not draft
from a model yet (``docs/draws.md``, "Not done").
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from swapos.policies.drafting import expected_tokens

MARGIN = 0.05
"""What drafting from a model must save, as a share of the plain decode's cost."""


class ModelDraft(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`choose_model_draft` chose: ``length`` tokens per draft (0: none), the
    expected cost of the answer in target steps both ways, and why."""

    length: int
    drafted_cost: float
    plain_cost: float
    reason: str


def choose_model_draft(
    *,
    same_vocabulary: bool,
    resident: bool,
    draft_step: float,
    verify_ratio: Sequence[float],
    acceptance: float,
    tokens: int,
    prompt_tokens: int = 0,
    prefill_step: float = 0.0,
    margin: float = MARGIN,
) -> ModelDraft:
    """The draft length a draft model should propose (rules 1-2 of the module docstring).

    Args:
        same_vocabulary: the two models' token tables are the same.
        resident: the draft model is loaded and free now.
        draft_step: the draft model's one-token decode wall over the target's.
        verify_ratio: the target's batch cost curve (entry ``d``: a batch of ``d + 1``).
        acceptance: per-token acceptance of the draft model's tokens by the target.
        tokens: the answer tokens expected.
        prompt_tokens: prompt tokens the draft model must read first.
        prefill_step: the draft model's prefill wall per token over the target's one-token
            decode wall.
    """
    plain = float(tokens)
    if not same_vocabulary or not resident:
        why = "another vocabulary" if not same_vocabulary else "the draft model is not resident"
        return ModelDraft(length=0, drafted_cost=plain, plain_cost=plain, reason=why)
    prefill = prompt_tokens * prefill_step
    best = ModelDraft(length=0, drafted_cost=plain, plain_cost=plain, reason="no length pays")
    for d in range(1, len(verify_ratio)):
        per_token = (d * draft_step + verify_ratio[d]) / expected_tokens(acceptance, d)
        cost = prefill + tokens * per_token
        if cost < best.drafted_cost and cost <= plain * (1.0 - margin):
            best = ModelDraft(
                length=d, drafted_cost=cost, plain_cost=plain,
                reason=f"{d} drafted: {cost:.1f} target steps vs {plain:.0f} plain",
            )  # fmt: skip
    return best
