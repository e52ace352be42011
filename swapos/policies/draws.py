"""How many sampled draws of one prompt to decode side by side, from a measured cost curve.

The curve is what ``bench decode`` measures per model and machine: the wall of one batch of
``k`` tokens as a multiple of one token's (``curve[k]``, ``curve[1] == 1``). Decoding ``k``
draws side by side costs about ``curve[k]`` per token for ``k`` tokens (the same matmuls as a
verification batch of ``k``), so on a flat curve (a GPU) side by side is nearly free and on a
steep one (a 2-core CPU: ``x4.14`` for 6 on the 0.5B here) it buys less than it seems.

The rules (:func:`plan_draws`), written once here:

1. ``draws`` draws are decoded in groups of ``k`` (the last may be smaller), one group after
   another; draws in turn are ``k = 1``.
2. The draws stop once one passes its check. With ``pass_rate`` ``p`` per draw, group ``g``
   (0-based) is decoded only when every draw before it failed: chance ``(1 - p) ** (k * g)``.
   A group is costed whole (the passing draw might be its last to end): the expected cost of
   ``k`` is ``sum_g (1 - p) ** (k * g) * cost(size_g)`` in one-sequence token steps per token
   of a draw; in turn that is ``sum_i (1 - p) ** i``.
3. ``cost(k)`` is the curve, linearly interpolated between measured sizes; a size past the
   largest measured one (or past ``room``, the sequences the memory and context can hold)
   is never chosen: its cost is unknown.
4. The ``k`` with the least expected cost wins, ties to the smaller ``k`` (less memory, and
   the first draw is checked sooner); a ``k > 1`` must beat in turn by ``margin`` (a share
   of in turn's cost), since the curve is measured with noise and side by side must never
   be slower.
5. Nothing measured, or one draw: in turn.
6. ``room`` (:func:`context_room`): the draws' context never holds more KV cells than the
   model's own context (its prompt once, then per draw the tokens it may evaluate), so side
   by side takes no more memory than one saved state of the whole context, which the process
   budget already keeps free while a model is resident (``ModelBackend.estimate_state_bytes``).

The pipeline asks with ``pass_rate`` the run's own share of draws that passed their check
(Laplace's rule, as :class:`~swapos.policies.outcomes.PassRate`: an even chance before any
draw), so draws that often pass go in turn and draws that rarely do go side by side.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import msgspec

MARGIN = 0.05
"""The share of in turn's expected cost a side-by-side plan must save to be chosen."""


class DrawPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`plan_draws` chose and why.

    Attributes:
        side_by_side: draws decoded at once (1: in turn).
        expected_cost: its expected cost, in one-sequence token steps per token of a draw.
        in_turn_cost: the same for the draws in turn.
        reason: one line for the event log.
    """

    side_by_side: int
    expected_cost: float
    in_turn_cost: float
    reason: str


def curve_from_ratios(ratios: Sequence[float]) -> dict[int, float]:
    """A cost curve ``{k: ratio}`` (``k >= 2``) from per-size ratios whose entry ``i`` is a
    batch of ``i + 1`` (``DraftCosts.verify_ratio``'s layout, entry 0 being 1)."""
    return {k: r for k, r in enumerate(ratios, start=1) if k >= 2}


def batch_cost(curve: Mapping[int, float], k: int) -> float | None:
    """The cost of a batch of ``k`` against one: measured, linearly interpolated between
    the nearest measured sizes, or None past the largest (unknown). ``k = 1`` costs 1."""
    if k == 1:
        return 1.0
    points = sorted({1: 1.0, **curve}.items())
    for (k0, c0), (k1, c1) in itertools.pairwise(points):
        if k0 <= k <= k1:
            return c0 + (c1 - c0) * (k - k0) / (k1 - k0)
    return None


def draw_cells(prompt_tokens: int, max_tokens: int, n_ctx: int) -> int:
    """KV cells one draw of ``max_tokens`` may add after a shared prompt: every token it
    evaluates (all but its last sampled one), never past ``n_ctx`` (a draw in turn stops
    there too)."""
    return min(max(max_tokens - 1, 0), max(n_ctx - prompt_tokens, 0))


def context_room(prompt_tokens: int, max_tokens: int, n_ctx: int) -> int:
    """Rule 6: the most draws of ``max_tokens`` whose cells (:func:`draw_cells`), with the
    prompt's once, fit in ``n_ctx`` (at least 1: one draw in turn is what a draw always
    costs)."""
    per_draw = draw_cells(prompt_tokens, max_tokens, n_ctx)
    if per_draw <= 0:
        return 1
    return max((n_ctx - prompt_tokens) // per_draw, 1)


def expected_cost(draws: int, k: int, cost: float, last: float, pass_rate: float) -> float:
    """Rule 2: the expected cost of ``draws`` in groups of ``k`` (``cost`` per full group,
    ``last`` for a smaller last group) when each draw passes with ``pass_rate``."""
    fail = 1.0 - pass_rate
    groups, rest = divmod(draws, k)
    total = sum(fail ** (k * g) * cost for g in range(groups))
    if rest:
        total += fail ** (k * groups) * last
    return total


def plan_draws(
    draws: int,
    curve: Mapping[int, float],
    *,
    pass_rate: float = 0.0,
    room: int | None = None,
    margin: float = MARGIN,
) -> DrawPlan:
    """How many of ``draws`` to decode side by side (the rules are the module's docstring).

    Args:
        draws: the draws wanted.
        curve: measured batch cost of ``k`` tokens against one, ``{k: ratio}``.
        pass_rate: the chance one draw passes its check (0: every draw is decoded).
        room: the most sequences the memory and the context can hold; None: no bound.
        margin: what a side-by-side plan must save, as a share of in turn's cost.
    """
    p = min(max(pass_rate, 0.0), 1.0)
    in_turn = expected_cost(draws, 1, 1.0, 1.0, p) if draws > 0 else 0.0
    best = DrawPlan(side_by_side=1, expected_cost=in_turn, in_turn_cost=in_turn, reason="in turn")
    top = min(draws, room if room is not None else draws)
    if draws <= 1 or not curve:
        why = "one draw" if draws <= 1 else "no cost curve measured"
        return msgspec.structs.replace(best, reason=f"in turn: {why}")
    for k in range(2, top + 1):
        cost = batch_cost(curve, k)
        last = batch_cost(curve, draws % k) if draws % k else 0.0
        if cost is None or last is None:
            break
        e = expected_cost(draws, k, cost, last, p)
        if e < best.expected_cost and e <= in_turn * (1.0 - margin):
            best = DrawPlan(
                side_by_side=k,
                expected_cost=e,
                in_turn_cost=in_turn,
                reason=f"{k} side by side: expected cost {e:.2f} vs {in_turn:.2f} in turn",
            )
    if best.side_by_side == 1:
        return msgspec.structs.replace(
            best, reason=f"in turn: no group size saves {margin:.0%} of {in_turn:.2f}"
        )
    return best
