"""``bench decode``'s measurement of a smaller model drafting for a larger one (issue 26,
item 3): recorded prompts decoded by the target plain and with the drafter's drafts at fixed
lengths (prompt lookup off, so the drafter's drafts alone are measured), the acceptance seen,
the speed-up measured and what rule 2 of ``policies/model_drafts.py`` predicts from the two
models' measured walls at that acceptance, and the length the rule would choose.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Sequence

import msgspec

from swapos.backends.llama.decode import Decoder
from swapos.backends.llama.handles import Handles
from swapos.backends.llama.model import LlamaModel
from swapos.backends.llama.model_draft import ModelDrafter
from swapos.backends.llama.vocab import tokenize
from swapos.bench.decode.measure import case_prompt
from swapos.bench.decode.replay import Recorded
from swapos.data.generation import DraftCosts, DraftRequest
from swapos.data.sampling import SamplingParams
from swapos.policies.model_drafts import choose_model_draft, drafted_cost

PAIR_KINDS = ("fix", "code")
"""The phase kinds measured: the long rewrites where a draft could pay."""


class PairCase(msgspec.Struct, frozen=True, kw_only=True):
    """One prompt decoded by ``target`` plain and drafted ``length`` at a time by
    ``drafter`` (greedy)."""

    target: str
    drafter: str
    task_id: str
    kind: str
    prompt_tokens: int
    tokens: int
    length: int
    plain_s: float
    drafted_s: float
    measured: float
    """``plain_s / drafted_s`` (decode time after the first token; the drafter reads the
    prompt inside it)."""
    acceptance: float
    """Accepted over tested drafted tokens (tested: accepted + the first rejected)."""
    predicted: float
    """Rule 2's speed-up at ``acceptance`` from the two models' measured walls."""
    rule_length: int
    """The length the rule would choose at ``acceptance`` (0: it would not draft)."""
    same_text: bool
    drafted: int
    accepted: int


def pair_cases(
    target: LlamaModel,
    drafter: LlamaModel,
    costs: tuple[DraftCosts, DraftCosts],
    cases: Sequence[Recorded],
    *,
    lengths: Sequence[int],
    per_kind: int,
    max_tokens: int,
) -> list[PairCase]:
    """Measure ``drafter`` drafting for ``target`` on the longest recorded prompts of each
    of :data:`PAIR_KINDS` (``per_kind`` of them that fit), at each of ``lengths``;
    ``costs``: the target's and the drafter's measured costs, for the prediction."""
    out: list[PairCase] = []
    for kind in PAIR_KINDS:
        pool = sorted((c for c in cases if c.kind == kind), key=lambda c: -len(c.output))
        taken = 0
        for case in pool:
            if taken >= per_kind:
                break
            work = functools.partial(
                _one, drafter=drafter, costs=costs, case=case, lengths=lengths,
                max_tokens=max_tokens,
            )  # fmt: skip
            got = target.with_handles(work)
            if got:
                taken += 1
                out.extend(got)
    return out


def _fixed(length: int, _tokens_left: int) -> int:
    return length


def _one(
    h: Handles,
    *,
    drafter: LlamaModel,
    costs: tuple[DraftCosts, DraftCosts],
    case: Recorded,
    lengths: Sequence[int],
    max_tokens: int,
) -> list[PairCase]:
    prompt = tokenize(h.vocab, case_prompt(case), special=True)
    if len(prompt) + max_tokens + 8 > min(h.n_ctx, drafter.spec.n_ctx):
        return []
    abort = threading.Event()
    off = DraftRequest(max_draft=0)
    params = SamplingParams(max_tokens=max_tokens, stop=("\n```",), draft=off)
    plain = Decoder(dataclasses.replace(h, draft_costs=None), abort, None, time.perf_counter())
    base = plain.run(prompt, params, None, None)
    out: list[PairCase] = []
    theirs, mine = costs
    for d in lengths:
        helper = ModelDrafter(drafter, functools.partial(_fixed, d), abort)
        handles = dataclasses.replace(h, draft_costs=None, drafter=helper)
        got = Decoder(handles, abort, None, time.perf_counter()).run(prompt, params, None, None)
        s = got.stats
        acceptance = helper.accepted / helper.tested if helper.tested else 0.0
        draft_step = mine.step_s / theirs.step_s
        prefill_step = mine.prefill_s_per_token / theirs.step_s
        cost = 0.0
        if d < len(theirs.verify_ratio):
            cost = drafted_cost(
                d, draft_step=draft_step, verify_ratio=theirs.verify_ratio,
                acceptance=acceptance, tokens=base.stats.tokens, prompt_tokens=len(prompt),
                prefill_step=prefill_step,
            )  # fmt: skip
        rule = choose_model_draft(
            same_vocabulary=True, resident=True, draft_step=draft_step,
            verify_ratio=theirs.verify_ratio, acceptance=acceptance, tokens=base.stats.tokens,
            prompt_tokens=len(prompt), prefill_step=prefill_step,
        )  # fmt: skip
        out.append(PairCase(
            target=h.name, drafter=drafter.name, task_id=case.task_id, kind=case.kind,
            prompt_tokens=len(prompt), tokens=s.tokens, length=d, plain_s=base.stats.gen_s,
            drafted_s=s.gen_s, measured=base.stats.gen_s / s.gen_s if s.gen_s > 0 else 0.0,
            acceptance=round(acceptance, 4),
            predicted=base.stats.tokens / cost if cost > 0 else 0.0,
            rule_length=rule.length, same_text=got.text == base.text,
            drafted=s.drafted_tokens, accepted=s.accepted_tokens,
        ))  # fmt: skip
    return out
