"""Measurements of ``bench decode``: the verification cost curve, prefill and decode rates,
the acceptance of each lookup rule on recorded outputs, and drafting vs plain on real
prompts. Everything here is synchronous: it runs in a worker thread holding the model's
lock (:meth:`~swapos.backends.llama.model.LlamaModel.with_handles`).
"""

from __future__ import annotations

import dataclasses
import statistics
import threading
import time
from collections.abc import Sequence

import llama_cpp
import msgspec

from swapos.backends.llama.decode import Decoder
from swapos.backends.llama.handles import Handles
from swapos.backends.llama.vocab import tokenize
from swapos.bench.decode.replay import Recorded
from swapos.data.generation import DraftCosts, DraftRequest
from swapos.data.sampling import SamplingParams
from swapos.policies.drafting import DraftPolicy, DraftRule, replay


class RuleStats(msgspec.Struct, frozen=True, kw_only=True):
    """One rule replayed on one phase kind's recorded outputs (drafts verified whole)."""

    rule: str
    ngram_min: int
    k: int
    kind: str
    cases: int
    tokens: int
    steps: int
    accepted: int
    tested: int
    cost: float
    """Single-token steps' worth of wall on this model's curve."""

    @property
    def tokens_per_step(self) -> float:
        return self.tokens / self.steps if self.steps else 0.0

    @property
    def acceptance(self) -> float:
        return self.accepted / self.tested if self.tested else 0.0

    @property
    def predicted_speedup(self) -> float:
        return self.tokens / self.cost if self.cost else 0.0


def _answer_tokens(h: Handles, text: str) -> list[int]:
    tokens = tokenize(h.vocab, text)
    bos = llama_cpp.llama_vocab_bos(h.vocab)
    return tokens[1:] if tokens[:1] == [bos] else tokens


def replay_rules(
    h: Handles, cases: list[Recorded], rules: list[DraftRule], ratio: Sequence[float]
) -> list[RuleStats]:
    """Every rule on every recorded case, summed per phase kind."""
    tokenized = [(c.kind, tokenize(h.vocab, c.context), _answer_tokens(h, c.output)) for c in cases]
    out: list[RuleStats] = []
    for rule in rules:
        for kind in sorted({k for k, _, _ in tokenized}):
            runs = [replay(ctx, ans, rule) for k, ctx, ans in tokenized if k == kind and ans]
            out.append(
                RuleStats(
                    rule=rule.name,
                    ngram_min=rule.ngram_min,
                    k=rule.k,
                    kind=kind,
                    cases=len(runs),
                    tokens=sum(r.tokens for r in runs),
                    steps=sum(r.steps for r in runs),
                    accepted=sum(r.accepted for r in runs),
                    tested=sum(r.tested for r in runs),
                    cost=sum(r.cost(ratio) for r in runs),
                )
            )
    return out


def choose_costs(
    ratio: tuple[float, ...],
    stats: list[RuleStats],
    source: str,
    *,
    step_s: float = 0.0,
    prefill_s_per_token: float = 0.0,
) -> DraftCosts:
    """The costs the policy reads: the curve, the model's step and prefill walls (what a
    draft model's costs are weighed with, ``policies/model_drafts.py``), and the acceptance
    per kind of the n-gram rule with the best predicted speed-up over all kinds (at its
    longest ``k``)."""
    if not stats:
        return DraftCosts(
            verify_ratio=ratio, source=source, step_s=step_s,
            prefill_s_per_token=prefill_s_per_token,
        )  # fmt: skip
    by_min: dict[int, float] = {}
    for s in stats:
        by_min[s.ngram_min] = by_min.get(s.ngram_min, 0.0) + s.tokens / max(s.cost, 1e-9)
    best = max(by_min, key=lambda n: by_min[n])
    k = max(s.k for s in stats if s.ngram_min == best)
    acceptance = {s.kind: round(s.acceptance, 4) for s in stats if (s.ngram_min, s.k) == (best, k)}
    if "fix" in acceptance:  # a predicted output is a file to rewrite, as a fix rewrites one
        acceptance.setdefault("prediction", acceptance["fix"])
    return DraftCosts(
        verify_ratio=ratio, acceptance=acceptance, ngram_min=best, ngram_max=3, source=source,
        step_s=step_s, prefill_s_per_token=prefill_s_per_token,
    )  # fmt: skip


class SpeedCase(msgspec.Struct, frozen=True, kw_only=True):
    """One prompt decoded plain and with the policy on (the same greedy settings)."""

    task_id: str
    kind: str
    prompt_tokens: int
    tokens: int
    plain_s: float
    """Decode time plain, after the first token (the median of ``rounds`` timings)."""
    draft_s: float
    """The same with the policy on."""
    measured: float
    """``plain_s / draft_s``."""
    predicted: float
    """What the curve predicts for the plain output, replayed through the policy."""
    same_text: bool
    drafted: int
    accepted: int
    verify_steps: int
    rounds: int = 1
    """Timings each way: one plain and one drafted decode per round, which goes first
    alternating from round to round."""


_ASK = {
    "reason": "Plan the change in numbered steps.",
    "critic": "Say what to fix.",
    "code": "Write solution.py.",
    "fix": "Write solution.py.",
}


def case_prompt(case: Recorded) -> str:
    """A ChatML prompt of the recorded context (a rewrite opens a python fence)."""
    opening = "```python\n" if case.kind in ("code", "fix") else ""
    return (
        f"<|im_start|>user\n{case.context}\n\n{_ASK.get(case.kind, '')}<|im_end|>\n"
        f"<|im_start|>assistant\n{opening}"
    )


def speed_case(
    h: Handles, costs: DraftCosts, case: Recorded, *, max_tokens: int, draft_first: bool,
    rounds: int = 1,
) -> SpeedCase | None:  # fmt: skip
    """Decode ``case``'s prompt plain and with drafting, ``rounds`` times each, the first
    round in the order given and each next round in the other; the walls are the medians
    (one 96-token timing on a 2-core machine varies by several per cent, more than the
    never-slower bound). None when the prompt leaves no room for ``max_tokens`` in the
    context."""
    prompt = tokenize(h.vocab, case_prompt(case), special=True)
    if len(prompt) + max_tokens + 8 > h.n_ctx:
        return None
    abort = threading.Event()

    Timed = tuple[Decoder, float, str, int, int, int]  # decoder, gen_s, text, drafts

    def run(drafting: bool) -> Timed:
        handles = dataclasses.replace(h, draft_costs=costs if drafting else None)
        request = DraftRequest(kind=case.kind, max_draft=None if drafting else 0)
        params = SamplingParams(max_tokens=max_tokens, stop=("\n```",), draft=request)
        dec = Decoder(handles, abort, None, time.perf_counter())
        out = dec.run(prompt, params, None, None)
        s = out.stats
        return dec, s.gen_s, out.text, s.drafted_tokens, s.accepted_tokens, s.verify_steps

    plains: list[Timed] = []
    drafts: list[Timed] = []
    for i in range(max(rounds, 1)):  # at least one round
        drafted_first = draft_first != (i % 2 == 1)
        a, b = run(drafted_first), run(not drafted_first)
        drafts.append(a if drafted_first else b)
        plains.append(b if drafted_first else a)
    plain_s = statistics.median(p[1] for p in plains)
    draft_s = statistics.median(d[1] for d in drafts)
    plain, draft = plains[0], drafts[0]
    answer = plain[0].generated
    policy = DraftPolicy(costs, DraftRequest(kind=case.kind))
    rep = replay(prompt, answer, policy.rule, policy)
    predicted = rep.tokens / rep.cost(costs.verify_ratio) if answer else 1.0
    same = all(p[2] == plain[2] for p in plains) and all(d[2] == plain[2] for d in drafts)
    return SpeedCase(
        task_id=case.task_id, kind=case.kind, prompt_tokens=len(prompt), tokens=len(answer),
        plain_s=plain_s, draft_s=draft_s,
        measured=plain_s / draft_s if draft_s > 0 else 0.0, predicted=predicted,
        same_text=same, drafted=draft[3], accepted=draft[4], verify_steps=draft[5],
        rounds=len(plains),
    )  # fmt: skip
