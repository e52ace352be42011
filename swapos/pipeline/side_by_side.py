"""A task's draws decoded side by side (the *Draws* rule of :mod:`swapos.policies.retry`).

The retry policy asks for draws one at a time and checks each before asking for the next;
each draw's step names the draws that may follow it (``Generate.then``). At the first draw of
an attempt the conductor asks the draws policy (:mod:`swapos.policies.draws`, through
:meth:`PhaseRunner.draw_plan`) whether decoding them side by side pays; if it does, every
draw starts at once (:meth:`PhaseRunner.open_draws`) and each draw step takes the first of
the draws left to finish (its output's ``drew`` says which, when it is not the step's own),
so a short draw is checked while the long ones go on. The draws still running are dropped when
the policy moves on: a draw passed (its ``Replace`` and ``Grade``), or none did (any step
that is not a draw's, its check or its verdict). Otherwise the draws go in turn, one
phase each, as before.

Each draw taken is one trial of the run's draw pass rate (:meth:`PhaseRunner.draw_checked`):
it passed when the policy puts it in the candidate's place, else it failed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import msgspec
from anyio.abc import TaskGroup

from swapos.data.sampling import SamplingParams
from swapos.pipeline.phase_runner import Draws, PhaseOutput, PhaseRunner
from swapos.policies import retry


@dataclass
class InFlight:
    """Draws of one attempt decoding side by side, one per sampling, in the policy's order."""

    attempt: int
    samplings: tuple[tuple[float, int], ...]
    draws: Draws


@dataclass
class DrawState:
    """The conductor's draws of one task: the task group draws decode in, the batch in
    flight, and whether the newest draw taken is still to be judged."""

    tg: TaskGroup | None = None
    in_flight: InFlight | None = None
    unjudged: bool = False


_KEEP_OPEN = (retry.Decide, retry.SelfCheck, retry.Keep)
"""Steps between two draws: a draw's verdict, its check, a candidate kept."""


async def before(runner: PhaseRunner, state: DrawState, step: retry.Action) -> None:
    """Settle what ``step`` ends: a passing draw (``Replace``) is judged passed; a step that
    leaves the draws judges the newest draw failed and drops the batch in flight."""
    if isinstance(step, retry.Replace):
        _judge(runner, state, passed=True)
    elif isinstance(step, retry.Generate) and step.prompt == "draw":
        _judge(runner, state, passed=False)  # the draw before it did not pass
    elif not isinstance(step, _KEEP_OPEN):
        await leave(runner, state)


async def leave(runner: PhaseRunner, state: DrawState) -> None:
    """The task is done with its draws: the newest (if unjudged) failed; drop the rest."""
    _judge(runner, state, passed=False)
    if state.in_flight is not None:
        in_flight, state.in_flight = state.in_flight, None
        await in_flight.draws.close()


def _covers(in_flight: InFlight, step: retry.Generate) -> bool:
    return in_flight.attempt == step.attempt and step.sampling in in_flight.samplings


def _judge(runner: PhaseRunner, state: DrawState, *, passed: bool) -> None:
    if state.unjudged:
        state.unjudged = False
        runner.draw_checked(passed)


async def generate(
    runner: PhaseRunner,
    state: DrawState,
    step: retry.Generate,
    *,
    task_id: str,
    prompt: str,
    params: SamplingParams,
    special: bool,
    decide: Callable[[str], Awaitable[None]],
    in_turn: Callable[[], Awaitable[PhaseOutput]],
) -> PhaseOutput:
    """Draw ``step``'s output: from the batch in flight, from one opened now when the draws
    policy says side by side pays, else from a phase of its own (in turn)."""
    state.unjudged = True
    in_flight = state.in_flight
    if in_flight is not None and _covers(in_flight, step):
        return await _take(in_flight, step)
    samplings = (step.sampling, *step.then) if step.sampling is not None else ()
    if state.tg is not None and len(samplings) > 1:  # the policy names the draws that follow
        count = await runner.token_counter(step.model)
        plan = await runner.draw_plan(
            step.model, len(samplings), prompt_tokens=count(prompt), max_tokens=params.max_tokens
        )
        if plan.side_by_side > 1:
            await decide(f"draws {len(samplings)} from here: {plan.reason}")
            per_draw = [
                msgspec.structs.replace(params, temperature=t, seed=s) for t, s in samplings
            ]
            draws = await runner.open_draws(
                state.tg, task_id=task_id, model=step.model, prompt=prompt, params=per_draw,
                attempt=step.attempt, upcoming=step.upcoming, special=special,
                side_by_side=plan.side_by_side,
            )  # fmt: skip
            state.in_flight = InFlight(attempt=step.attempt, samplings=samplings, draws=draws)
            return await _take(state.in_flight, step)
    return await in_turn()


async def _take(in_flight: InFlight, step: retry.Generate) -> PhaseOutput:
    """The first to finish of the draws ``step`` may take (its own and its ``then``); its
    output says which when it is not the step's own."""
    left = {step.sampling, *step.then}
    index, out = await in_flight.draws.take_first(
        [i for i, s in enumerate(in_flight.samplings) if s in left]
    )
    drew = in_flight.samplings[index]
    return out if drew == step.sampling else msgspec.structs.replace(out, drew=drew)
