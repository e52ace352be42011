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
3. **Which model** (:func:`pick_drafter`): of the resident models with the same vocabulary
   and measured walls, the one rule 2 expects to cost least; a pinned length takes the
   first with the same vocabulary, whatever the costs. Models never measured are never
   weighed (what pays is measured, not assumed).
4. **Acceptance** (:func:`drafter_acceptance`): a drafter's per-token acceptance starts at
   :data:`PRIOR_ACCEPTANCE`, weighted as ``drafting.PRIOR_WEIGHT`` tokens, and follows what
   its drafts for this target were accepted, across generations; within a generation each
   step asks rule 2 again with the running figure (no prompt to read any more), so a
   drafter whose drafts are rejected stops drafting.
5. Prompt lookup comes first: a lookup draft costs nothing to make, so the model drafts
   only at the steps where the lookup finds none or the lookup policy declines it.

On the 2-core CPU this was written on it never pays: the 0.5B's step is 0.83 of the 1.5B's
(48.5 against 58.2 ms, ``docs/benchmarks.md``), so even with every drafted token accepted the
best yield per cost is below a plain step (``tests/test_model_drafts.py``). A GPU's flat
curve and a small drafter's cheap step are where it pays. The decode loop drafts from the
chosen model on its own context (``backends/llama/model_draft.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from swapos.policies.drafting import estimate_acceptance, expected_tokens

MARGIN = 0.05
"""What drafting from a model must save, as a share of the plain decode's cost."""

PRIOR_ACCEPTANCE = 0.5
"""A drafter's per-token acceptance before any of its drafts for the target was verified
(an even chance: greedy agreement between two sizes of one family is often higher, and the
running figure takes over within a few dozen tokens)."""


class ModelDraft(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`choose_model_draft` chose: ``length`` tokens per draft (0: none), the
    expected cost of the answer in target steps both ways, and why."""

    length: int
    drafted_cost: float
    plain_cost: float
    reason: str


def drafted_cost(
    d: int,
    *,
    draft_step: float,
    verify_ratio: Sequence[float],
    acceptance: float,
    tokens: int,
    prompt_tokens: int = 0,
    prefill_step: float = 0.0,
) -> float:
    """Rule 2's cost, in target steps, of ``tokens`` answer tokens drafted ``d`` at a time
    (the arguments as for :func:`choose_model_draft`); ``tokens`` is the plain cost."""
    per_token = (d * draft_step + verify_ratio[d]) / expected_tokens(acceptance, d)
    return prompt_tokens * prefill_step + tokens * per_token


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
    best = ModelDraft(length=0, drafted_cost=plain, plain_cost=plain, reason="no length pays")
    for d in range(1, len(verify_ratio)):
        cost = drafted_cost(
            d, draft_step=draft_step, verify_ratio=verify_ratio, acceptance=acceptance,
            tokens=tokens, prompt_tokens=prompt_tokens, prefill_step=prefill_step,
        )  # fmt: skip
        if cost < best.drafted_cost and cost <= plain * (1.0 - margin):
            best = ModelDraft(
                length=d, drafted_cost=cost, plain_cost=plain,
                reason=f"{d} drafted: {cost:.1f} target steps vs {plain:.0f} plain",
            )  # fmt: skip
    return best


class Drafter(msgspec.Struct, frozen=True, kw_only=True):
    """A resident model that might draft for the target: what rules 3 and 4 weigh.

    Attributes:
        name: the model's name.
        same_vocabulary: its token table is the target's (the GGUF files' digests agree).
        step_s: its one-token decode wall, seconds (0: not measured).
        prefill_s_per_token: its prefill wall per prompt token, seconds (0: not measured).
        accepted: its drafted tokens the target accepted so far.
        tested: its drafted tokens the target tested (accepted + first rejected per draft).
    """

    name: str
    same_vocabulary: bool
    step_s: float
    prefill_s_per_token: float
    accepted: int = 0
    tested: int = 0


def drafter_acceptance(drafter: Drafter) -> float:
    """Rule 4: the drafter's running per-token acceptance for this target."""
    return estimate_acceptance(PRIOR_ACCEPTANCE, drafter.accepted, drafter.tested)


def pick_drafter(
    drafters: Sequence[Drafter],
    *,
    target_step_s: float,
    verify_ratio: Sequence[float],
    tokens: int,
    prompt_tokens: int,
    pinned: int | None = None,
) -> tuple[Drafter, ModelDraft] | None:
    """Rule 3: the drafter to use for one generation and its first draft length, or None.

    Args:
        drafters: the resident models other than the target.
        target_step_s: the target's one-token decode wall (0: not measured).
        verify_ratio: the target's batch cost curve.
        tokens: the answer tokens expected (the generation's cap).
        prompt_tokens: the prompt, which the drafter must read first.
        pinned: a pinned draft length (``DraftRequest.model_draft``); 0 never drafts.
    """
    if pinned is not None:
        if pinned <= 0:
            return None
        for d in drafters:
            if d.same_vocabulary:
                plain, why = float(tokens), f"{pinned} drafted by {d.name} (pinned)"
                return d, ModelDraft(
                    length=pinned, drafted_cost=plain, plain_cost=plain, reason=why
                )
        return None
    best: tuple[Drafter, ModelDraft] | None = None
    if target_step_s <= 0 or len(verify_ratio) < 2:
        return None
    for d in drafters:
        if d.step_s <= 0 or d.prefill_s_per_token <= 0:
            continue
        got = choose_model_draft(
            same_vocabulary=d.same_vocabulary, resident=True,
            draft_step=d.step_s / target_step_s, verify_ratio=verify_ratio,
            acceptance=drafter_acceptance(d), tokens=tokens, prompt_tokens=prompt_tokens,
            prefill_step=d.prefill_s_per_token / target_step_s,
        )  # fmt: skip
        if got.length > 0 and (best is None or got.drafted_cost < best[1].drafted_cost):
            best = (d, got)
    return best


def draft_length(
    drafter: Drafter,
    *,
    target_step_s: float,
    verify_ratio: Sequence[float],
    tokens: int,
    pinned: int | None = None,
) -> int:
    """Rule 4 within a generation: the length of the next draft from ``drafter`` (its
    counts the running ones), with ``tokens`` answer tokens left and the prompt read."""
    if pinned is not None:
        return max(0, pinned)
    if target_step_s <= 0 or drafter.step_s <= 0 or tokens <= 0:
        return 0
    return choose_model_draft(
        same_vocabulary=drafter.same_vocabulary, resident=True,
        draft_step=drafter.step_s / target_step_s, verify_ratio=verify_ratio,
        acceptance=drafter_acceptance(drafter), tokens=tokens,
    ).length  # fmt: skip
