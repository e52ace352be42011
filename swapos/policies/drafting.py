"""Prompt-lookup drafting: where a draft comes from, how long to verify, what it yields.

A decode step normally yields one token. With a *draft* of ``d`` tokens (the tokens that
followed the latest earlier occurrence of the answer's last 1-3 tokens, in the predicted
output, the prompt or the answer so far) the step evaluates ``d + 1`` tokens in one batch
with logits at every position, keeps the longest prefix of the draft the model agrees with
and the model's own next token: between 1 and ``d + 1`` tokens for one batch.

The rules, written once here:

1. **Lookup** (:func:`lookup`): for ``n`` from ``ngram_max`` down to ``ngram_min``, the
   answer's last ``n`` tokens are looked up in each source in turn (the prediction first,
   then the prompt + answer); the first hit drafts the up-to-``k`` tokens that followed its
   latest occurrence. No hit: no draft.
2. **Yield** (:func:`expected_tokens`): with a per-token acceptance ``a`` (the chance the
   model agrees with a drafted token, given it agreed with the ones before), verifying
   ``d`` tokens yields ``1 + a + ... + a**d`` tokens.
3. **Cost**: a batch of ``b`` tokens costs ``verify_ratio[b - 1]`` single-token steps, as
   measured per model and machine (``bench decode``).
4. **Length** (:func:`choose_length`): verify the ``d`` (up to what the lookup found and the
   curve covers) with the best yield per cost, if it beats a plain step by
   :data:`MARGIN`; otherwise 0. No measured curve: 0. A pinned length is taken as is.
5. **Running acceptance** (:class:`DraftPolicy`): ``a`` starts at the acceptance measured
   for the phase kind, weighted as :data:`PRIOR_WEIGHT` tokens, and is updated by every
   verified draft (accepted tokens over tested tokens: the accepted ones and the first
   rejected one). While the policy does not draft, the draft's first token is still compared
   with the token the model produced (free), so a phase whose drafts turn good can start.

Pure and synchronous: the decode loop feeds it tokens and outcomes and asks for lengths;
the bench replays recorded outputs through the same functions (:func:`replay`).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from swapos.data.generation import DraftCosts, DraftRequest

MARGIN = 0.05
"""A draft is verified only if it is expected to yield 5 % more tokens per unit of cost
than a plain step (the never-slower target allows 3 %)."""

PRIOR_WEIGHT = 16.0
"""How many tested tokens the measured acceptance of a phase kind counts as."""

MAX_DRAFT = 16
"""The longest draft looked up (verification batches hold at most this many + 1 tokens)."""


class DraftRule(msgspec.Struct, frozen=True, kw_only=True):
    """A lookup rule: n-gram lengths tried (longest first) and the draft cap ``k``."""

    ngram_min: int = 1
    ngram_max: int = 3
    k: int = 8

    @property
    def name(self) -> str:
        """``lookup<min>-<max>`` (the cap is a separate figure)."""
        return f"lookup{self.ngram_min}-{self.ngram_max}"


class NgramIndex:
    """Tokens and, for each n-gram (n <= ``ngram_max``) with a known continuation, the
    position right after its latest occurrence.

    An n-gram is indexed once the token after it exists, so the answer's own last n tokens
    never match themselves.
    """

    def __init__(self, tokens: Sequence[int] = (), *, ngram_max: int = 3) -> None:
        self.ngram_max = ngram_max
        self.tokens: list[int] = []
        self._next: dict[tuple[int, ...], int] = {}
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def append(self, token: int) -> None:
        at = len(self.tokens)
        for n in range(1, min(self.ngram_max, at) + 1):
            self._next[tuple(self.tokens[at - n : at])] = at
        self.tokens.append(token)

    def extend(self, tokens: Sequence[int]) -> None:
        for token in tokens:
            self.append(token)

    def follow(self, ngram: Sequence[int], k: int) -> list[int]:
        """Up to ``k`` tokens after the latest occurrence of ``ngram`` (empty: none)."""
        at = self._next.get(tuple(ngram))
        return [] if at is None else self.tokens[at : at + k]


def lookup(sources: Sequence[NgramIndex], suffix: Sequence[int], rule: DraftRule) -> list[int]:
    """Rule 1: the draft for an answer ending in ``suffix``, from the first source that has
    the longest n-gram match."""
    if rule.k <= 0:
        return []
    for n in range(min(rule.ngram_max, len(suffix)), rule.ngram_min - 1, -1):
        tail = suffix[len(suffix) - n :]
        for source in sources:
            draft = source.follow(tail, rule.k)
            if draft:
                return draft
    return []


def expected_tokens(acceptance: float, d: int) -> float:
    """Rule 2: tokens one verification of ``d`` drafted tokens yields on average."""
    return float(sum(acceptance**i for i in range(d + 1)))


def choose_length(
    verify_ratio: Sequence[float], acceptance: float, available: int, *, margin: float = MARGIN
) -> int:
    """Rule 4: how many of ``available`` drafted tokens to verify (0: a plain step)."""
    longest = min(available, len(verify_ratio) - 1)
    best, best_gain = 0, 1.0 + margin
    for d in range(1, longest + 1):
        gain = expected_tokens(acceptance, d) / verify_ratio[d]
        if gain > best_gain:
            best, best_gain = d, gain
    return best


def estimate_acceptance(prior: float, accepted: int, tested: int) -> float:
    """Rule 5: the running acceptance (the prior counts as :data:`PRIOR_WEIGHT` tokens)."""
    return (accepted + prior * PRIOR_WEIGHT) / (tested + PRIOR_WEIGHT)


def tested_tokens(drafted: int, accepted: int) -> int:
    """Drafted tokens a verification tested: the accepted ones and the first rejected one."""
    return min(drafted, accepted + 1)


class DraftPolicy:
    """One generation's drafting: its rule, running acceptance and per-step lengths.

    Args:
        costs: the model's measured costs (None: never draft unless pinned).
        request: the generation's drafting data (phase kind, pinned length).
    """

    def __init__(self, costs: DraftCosts | None, request: DraftRequest | None) -> None:
        request = request or DraftRequest()
        self.costs = costs
        self.pinned = request.max_draft
        self.prior = 0.0
        if costs is not None:
            self.prior = costs.acceptance.get(request.kind, costs.default_acceptance)
            self.rule = DraftRule(
                ngram_min=costs.ngram_min, ngram_max=costs.ngram_max,
                k=min(MAX_DRAFT, len(costs.verify_ratio) - 1),
            )  # fmt: skip
        else:
            self.rule = DraftRule(k=0)
        if self.pinned is not None:
            self.rule = msgspec.structs.replace(self.rule, k=min(MAX_DRAFT, self.pinned))
        self.accepted = 0
        self.tested = 0

    @property
    def active(self) -> bool:
        """Whether looking up drafts can ever lead to a verification."""
        return self.rule.k > 0

    @property
    def acceptance(self) -> float:
        return estimate_acceptance(self.prior, self.accepted, self.tested)

    def length(self, available: int) -> int:
        """Drafted tokens to verify this step, of the ``available`` the lookup found."""
        if self.pinned is not None:
            return min(available, self.rule.k)
        if self.costs is None:
            return 0
        return choose_length(self.costs.verify_ratio, self.acceptance, available)

    def observe(self, drafted: int, accepted: int) -> None:
        """A verification of ``drafted`` tokens accepted ``accepted`` of them."""
        self.accepted += accepted
        self.tested += tested_tokens(drafted, accepted)

    def observe_unverified(self, first: int, produced: int) -> None:
        """A plain step was taken while the lookup had a draft starting with ``first``;
        the model produced ``produced``."""
        self.observe(1, int(first == produced))


class Replay(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded answer replayed against a rule (greedy acceptance: the recorded tokens
    are what the model chose).

    Attributes:
        tokens: the answer's tokens.
        steps: target passes needed (plain decoding needs ``tokens``).
        drafted: drafted tokens verified.
        accepted: drafted tokens accepted.
        tested: drafted tokens tested (accepted + first rejected).
        batches: for each draft length ``d`` (a batch of ``d + 1`` tokens; 0 is a plain
            step), the steps that used it.
    """

    tokens: int
    steps: int
    drafted: int
    accepted: int
    tested: int
    batches: tuple[int, ...]

    @property
    def tokens_per_step(self) -> float:
        return self.tokens / self.steps if self.steps else 0.0

    @property
    def acceptance(self) -> float:
        return self.accepted / self.tested if self.tested else 0.0

    def cost(self, verify_ratio: Sequence[float]) -> float:
        """Single-token steps' worth of wall the replayed steps cost on ``verify_ratio``."""
        last = len(verify_ratio) - 1
        return sum(n * verify_ratio[min(d, last)] for d, n in enumerate(self.batches))


def replay(
    context: Sequence[int],
    answer: Sequence[int],
    rule: DraftRule,
    policy: DraftPolicy | None = None,
) -> Replay:
    """Decode ``answer`` after ``context`` with rule ``rule`` and count the steps (rules 1,
    2, and the cost of rule 3): every draft found verified whole, or, with ``policy``, as
    much of it as the policy chooses (observing outcomes as the decode loop does)."""
    history = NgramIndex(context, ngram_max=rule.ngram_max)
    i = steps = drafted = accepted = tested = 0
    batches = [0] * (rule.k + 1)
    while i < len(answer):
        draft = lookup([history], history.tokens, rule)
        if policy is not None and draft:
            d = policy.length(len(draft))
            if d == 0:
                policy.observe_unverified(draft[0], answer[i])
            draft = draft[:d]
        m = 0
        while m < len(draft) and i + m < len(answer) and draft[m] == answer[i + m]:
            m += 1
        if draft:
            drafted += len(draft)
            accepted += m
            tested += tested_tokens(len(draft), m)
            if policy is not None:
                policy.observe(len(draft), m)
        batches[len(draft)] += 1
        step = min(m + 1, len(answer) - i)
        history.extend(answer[i : i + step])
        i += step
        steps += 1
    return Replay(
        tokens=len(answer), steps=steps, drafted=drafted, accepted=accepted, tested=tested,
        batches=tuple(batches),
    )  # fmt: skip
