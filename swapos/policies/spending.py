"""What a task's generations cost, and whether the next one is still affordable. Pure.

A generation's cost is its tokens at its model's measured milliseconds per token plus the
prompt tokens it prefilled at the model's prefill milliseconds per token
(:class:`ModelCost`: ``bench decode``'s measurement of the model on this machine; a model
not measured is taken at :data:`UNMEASURED`, the order of this project's 2-core CPU for the
bundled models: 60 ms a generated token, a prefilled one 16 times cheaper). A task's *spend
limit* is a number of seconds (``pipeline.task_seconds``) or a multiple of its first code
answer's cost (``pipeline.task_budget``), the smaller where both are set (with
``pipeline.count_wall`` the task's wall-clock so far is spent where it is more than its
answers' cost: the policy's *Spend* rule); an attempt's draws may also cost at most
``pipeline.draw_seconds`` in all: a draw of a 400-token file costs twenty draws of a
20-token body, so the same limit allows many cheap draws and few dear ones. The next
generation is affordable while what was spent plus what it is expected to cost stays within
the limit; its expected cost is the mean of the answers it would repeat (an attempt's draws:
that attempt's answers; a new attempt: the task's code answers), at its model's costs.
"""

from __future__ import annotations

import msgspec

PREFILL_SHARE = 1 / 16
"""An unmeasured model's prefill cost per prompt token, against one generated token."""
UNMEASURED_MS = 60.0
"""An unmeasured model's milliseconds per generated token."""


class ModelCost(msgspec.Struct, frozen=True, kw_only=True):
    """What a model's tokens cost, in milliseconds."""

    ms_per_token: float = UNMEASURED_MS
    prefill_ms_per_token: float = UNMEASURED_MS * PREFILL_SHARE


UNMEASURED = ModelCost()


class Spend(msgspec.Struct, frozen=True, kw_only=True):
    """A task's generations so far: their cost, and the tokens they generated and
    prefilled (for what the next one is expected to cost)."""

    cost: float = 0.0
    answers: int = 0
    tokens: int = 0
    prefilled: int = 0

    def add(self, cost: float, tokens: int, prefilled: int) -> Spend:
        return Spend(
            cost=self.cost + cost,
            answers=self.answers + 1,
            tokens=self.tokens + tokens,
            prefilled=self.prefilled + prefilled,
        )

    def expected(self, model: ModelCost) -> float:
        """A next answer like these at ``model``'s costs (0 before any answer)."""
        if not self.answers:
            return 0.0
        return generation_cost(
            model, tokens=self.tokens / self.answers, prefilled=self.prefilled / self.answers
        )


def generation_cost(model: ModelCost, *, tokens: float, prefilled: float) -> float:
    """One generation's cost: its tokens and its prefilled prompt tokens at ``model``'s
    costs."""
    return tokens * model.ms_per_token + prefilled * model.prefill_ms_per_token


def spend_limit(*, first: float, multiple: float, seconds: float) -> float:
    """A task's spend limit in milliseconds: the smaller of ``multiple`` times its first
    answer's cost ``first`` and ``seconds``; 0 for none (neither set, or no first answer
    yet for a limit that is only a multiple)."""
    limits = [multiple * first] if multiple > 0 and first > 0 else []
    limits += [seconds * 1000] if seconds > 0 else []
    return min(limits, default=0.0)


def affordable(*, spent: float, expected: float, limit: float) -> bool:
    """Whether a generation expected to cost ``expected`` fits a task that has spent
    ``spent`` under ``limit`` (0: no limit)."""
    return limit <= 0 or spent + expected <= limit
