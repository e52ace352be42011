"""Conduct one task through the pipeline: reason -> code -> [selfcheck] -> grade -> code

The conductor is the Router's per-task loop. What the task does next (every retry rule:
second opinions, repeats, pre-grade checks, draws) is the retry policy's,
:mod:`swapos.policies.retry`, whose docstring is the one place the rules are written. The
conductor asks it for the next step, carries the step out (:mod:`~swapos.pipeline.steps`,
:mod:`~swapos.pipeline.prechecks`) through the Router, its :class:`PhaseRunner`, and feeds
back what came of it. It runs a task with the passes the profile names
(:class:`~swapos.pipeline.hooks.Passes`), or with none: the core alone.
"""

from __future__ import annotations

from typing import assert_never

import anyio
import msgspec

from swapos.capsule.schema import encode_capsule
from swapos.data.task import Task
from swapos.errors import one_error
from swapos.pipeline import side_by_side, steps
from swapos.pipeline.hooks import NO_PASSES, Passes
from swapos.pipeline.identity import candidate_identity
from swapos.pipeline.phase_runner import PhaseRunner
from swapos.pipeline.prechecks import selfcheck
from swapos.pipeline.routing import RoutePlan, route
from swapos.policies import retry
from swapos.policies.retry_decisions import EARLY
from swapos.policies.retry_text import ended, said
from swapos.policies.spending import ModelCost


class Conducted(msgspec.Struct, frozen=True, kw_only=True):
    """How a conducted task ended (its numbers are in the event log)."""

    passed: bool
    error: str | None
    capsule_json: bytes


async def conduct(
    task: Task,
    runner: PhaseRunner,
    *,
    passes: Passes = NO_PASSES,
    max_attempts: int | None = None,
) -> Conducted:
    """Run ``task`` to its end with ``passes`` (``max_attempts`` code attempts, default the
    profile's); every failure ends the task with a reason, never a crash of the system.
    Cancellation propagates (the task is recorded as cancelled, with what it had done)."""
    costs = {m: c for m in runner.profile.models if (c := await runner.model_cost(m))}
    state = retry.TaskState(rules=rules(task, runner, max_attempts, costs))
    work = steps.Work(task, passes)
    await runner.task_started(task)
    try:
        plan = route(task, runner.profile, passes)
        work.brief = plan.brief
        outcome: retry.Outcome = retry.Started(
            plan_first=plan.reason, models=plan.models, why=tuple(plan.why),
            examples=plan.examples is not None,
        )  # fmt: skip
        # the draws' task group: its draws in flight only ever end by cancellation
        with one_error():
            async with anyio.create_task_group() as work.draws.tg:
                while True:
                    state, step = retry.next_step(
                        state, outcome, expects_pass=runner.expects_pass(),
                        wall_s=runner.task_wall(),
                    )  # fmt: skip
                    if isinstance(step, retry.Finish):
                        if isinstance(step.ending, EARLY):  # the capsule says why it stopped
                            await steps.decide(runner, work, "code", ended(step.ending))
                        break
                    await side_by_side.before(runner, work.draws, step)
                    outcome = await carry_out(runner, work, plan, step)
                await side_by_side.leave(runner, work.draws)
    finally:
        with anyio.CancelScope(shield=True):
            await runner.task_finished(
                task,
                passed=state.passed,
                pass_at_1=state.pass_at_1,
                iterations=state.attempt,
                tests_passed=state.result.tests_passed if state.result else 0,
                tests_total=state.result.tests_total if state.result else 0,
                error=state.error if not state.passed else None,
                passed_attempt=state.passed_attempt,
                grades=state.grades,
            )
    capsule = encode_capsule(work.capsule)
    return Conducted(passed=state.passed, error=state.error, capsule_json=capsule)


def rules(
    task: Task,
    runner: PhaseRunner,
    max_attempts: int | None,
    costs: dict[str, ModelCost] | None = None,
) -> retry.Rules:
    """The policy's rules for ``task``: the profile's, the task's starter code, and the
    models' measured token costs."""
    cfg = runner.profile.pipeline
    repository = task.category != "completion" and bool(task.starter.strip())
    return retry.Rules(
        task_id=task.task_id, max_attempts=max_attempts or cfg.max_attempts,
        selfcheck=cfg.selfcheck, selfcheck_retries=cfg.selfcheck_retries,
        resamples=cfg.resamples, resample_temperature=cfg.resample_temperature,
        draws=cfg.draws, second_opinion=cfg.second_opinion, side_by_side=cfg.side_by_side,
        starter=candidate_identity(task.starter) if repository else None,
        task_budget=cfg.task_budget, task_seconds=cfg.task_seconds,
        stale_draws=cfg.stale_draws, draw_seconds=cfg.draw_seconds,
        stop_same_failure=cfg.stop_same_failure, reserve_next=cfg.reserve_next,
        price_attempts=cfg.price_attempts, count_wall=cfg.count_wall,
        costs=costs or {},
    )  # fmt: skip


async def carry_out(
    runner: PhaseRunner, work: steps.Work, plan: RoutePlan, step: retry.Action
) -> retry.Outcome:
    """Do ``step`` and say what came of it."""
    match step:
        case retry.Decide(decision=decision):
            await steps.decide(runner, work, step.phase, said(decision))
        case retry.Generate():
            return await steps.generate(runner, work, step)
        case retry.Price(step=priced):
            return await steps.price(runner, work, priced)
        case retry.Keep():
            steps.keep(work, step)
        case retry.SelfCheck():
            assert plan.examples is not None  # the policy checks only a task with examples
            return await selfcheck(runner, work, plan.examples, step)
        case retry.Replace():
            steps.replace(work, step)
        case retry.SendBack():
            steps.send_back(work, step)
        case retry.Grade():
            return await steps.grade_candidate(runner, work, step)
        case retry.Adopt():
            steps.adopt(work, step)
        case _:
            assert_never(step)
    return retry.Done()
