"""The conductor's draws side by side (``pipeline/side_by_side.py``): fake models whose
scripts measure a cost curve, the real sandboxed self-check and grader.

What the draws policy chooses is tested in ``test_draws_policy.py``; here: a task whose draws
decode side by side ends as the same draws in turn end it when they finish in order, each
draw is a phase of its own, a draw that finishes first is taken first, the draws after a
passing one are dropped (``stopped``), a task that leaves its draws drops them, and a
cancelled task leaves no draw, phase or lease behind.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from swapos.backends.fake_script import FakeModelScript
from swapos.capsule.schema import decode_capsule
from swapos.data.task import Task, TaskMeta
from swapos.messages.events import AnyEvent, GenerationStarted
from swapos.models.profile import ModelConfig, PipelineConfig, Profile
from swapos.policies.retry import resample_seed
from swapos.testing import FakeClock
from tests.fakes import DOCTEST_TASK, PLAIN, fake_system

pytestmark = pytest.mark.anyio

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WRONG = "def add(a, b):\n    return a * b\n```"
WRONG2 = "def add(a, b):\n    return a - b\n```"
RIGHT = "def add(a, b):\n    return a + b\n```"
LONG = " ".join(f"w{i}" for i in range(200))
ADD_TASK = Task(
    meta=TaskMeta(task_id="add", category="bugfix", difficulty=1, description="fix add"),
    root="",
    problem="`add(a, b)` should return the sum of a and b.",
    starter="def add(a, b):\n    return a - b\n",
    tests={
        "test_add.py": "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    },
)
UNCHANGED = "def add(a, b):\n    return a - b\n```"  # ADD_TASK's starter, as it was
FLAT = (1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
"""A flat cost curve (a GPU's): side by side always pays."""


def profile(**pipeline: Any) -> Profile:
    return Profile(
        name="fake",
        budget=1000,
        models={
            n: ModelConfig(path=f"/nonexistent/{n}.gguf", n_ctx=4096) for n in ("coder", "critic")
        },
        roles={"code": "coder"},
        pipeline=PipelineConfig(**{**PLAIN, **pipeline}),
    )


async def run(
    replies: tuple[str, ...],
    *,
    task: Task = DOCTEST_TASK,
    curve: tuple[float, ...] = (),
    fail_generations: tuple[int, ...] = (),
    cancel_after_draws: bool = False,
    **pipeline: Any,
) -> tuple[Any, Any, list[AnyEvent], float]:
    """Run ``task``; the outcome (None when cancelled), the system's statistics after,
    every event, and the task's wall on the fake clock."""
    clock = FakeClock()
    events: list[AnyEvent] = []
    drawing = anyio.Event()

    def on_event(ev: AnyEvent) -> None:
        events.append(ev)
        if isinstance(ev, GenerationStarted) and ev.request_id and "." in ev.request_id:
            drawing.set()  # a draw of a GenerateDraws started

    scripts = {
        "coder": FakeModelScript(
            load_s=1.0,
            token_s=0.5,
            replies=replies,
            chat_template=CHATML,
            draw_step_cost=curve,
            fail_generations=fail_generations,
        ),
        "critic": FakeModelScript(load_s=1.0, token_s=0.05, reply="it multiplies.\n\n"),
    }
    outcome = None
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            fake_system(
                scripts, budget=300, clock=clock, profile=profile(**pipeline), on_event=on_event
            ) as (sys, _),
        ):
            t0 = clock.now()
            if cancel_after_draws:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(sys.run_task, task)
                    await drawing.wait()
                    await clock.sleep(1.0)  # the draws are decoding
                    tg.cancel_scope.cancel()
            else:
                outcome = await sys.run_task(task)
            wall = clock.now() - t0
            while busy(sys.statistics()):  # noqa: ASYNC110 (a cancelled run winds down)
                await anyio.sleep(0.01)
            stats = sys.statistics()
    return outcome, stats, events, wall


def busy(stats: Any) -> bool:
    return bool(stats["router"].tasks_running or stats["generator"].running)


def draw_phases(outcome: Any) -> list[tuple[str, int, str]]:
    return [(p.phase, p.attempt, p.outcome) for p in outcome.result.phases]


async def test_draws_side_by_side_end_the_task_as_the_same_draws_in_turn() -> None:
    replies = (WRONG, WRONG2, RIGHT, LONG, LONG)
    turn, _, _, _ = await run(replies, max_attempts=3, draws=4)
    side, stats, side_events, _ = await run(replies, curve=FLAT, max_attempts=3, draws=4)
    for o in (turn, side):
        assert o.result.passed and (o.result.passed_attempt, o.result.grades) == (1, 1)
    got, want = decode_capsule(side.capsule_json), decode_capsule(turn.capsule_json)
    assert [a.code for a in got.artifacts] == [a.code for a in want.artifacts]
    plan = [d.text for d in got.decisions if d.text.startswith("draws 4 from here")]
    assert len(plan) == 1 and "side by side" in plan[0], got.decisions
    assert [d for d in got.decisions if d.text not in plan] == list(want.decisions)
    assert draw_phases(turn) == [
        *[("code", 1, "stop"), ("selfcheck", 1, "fail")] * 2,
        *[("code", 1, "stop"), ("selfcheck", 1, "pass"), ("grade", 1, "pass")],
    ]
    codes = [o for phase, _, o in draw_phases(side) if phase == "code"]
    assert len(codes) == 5  # the attempt, and each of its 4 draws a phase of its own
    drawn = {ev.request_id for ev in side_events if isinstance(ev, GenerationStarted)}
    assert len({r.rsplit(".", 1)[0] for r in drawn if r and "." in r}) == 1  # one request
    assert stats["router"].tasks_running == 0 and stats["generator"].running == 0
    assert not any(stats["loader"].leases.values())


async def add_task_three_draws(replies: tuple[str, ...]) -> tuple[Any, Any, Any]:
    """ADD_TASK (no plan) with three draws, in turn and side by side on a flat curve: both
    outcomes and the side-by-side system's statistics."""
    kw: dict[str, Any] = {"task": ADD_TASK, "max_attempts": 3, "draws": 3}
    kw["skip_reason_max_difficulty"] = 1
    turn, _, _, _ = await run(replies, **kw)
    side, stats, _, _ = await run(replies, curve=FLAT, **kw)
    return turn, side, stats


async def test_the_draws_after_a_passing_one_are_dropped() -> None:
    # the first candidate leaves the starter unchanged; draw 1 has nothing to check, so it
    # takes the candidate's place at once, while draws 2 and 3 (200 tokens) still decode
    replies = (UNCHANGED, RIGHT, LONG, LONG)
    turn, side, stats = await add_task_three_draws(replies)
    for o in (turn, side):
        assert o.result.passed and (o.result.passed_attempt, o.result.grades) == (1, 1)
    assert [o for phase, _, o in draw_phases(turn) if phase == "code"] == ["stop", "stop"]
    codes = [o for phase, _, o in draw_phases(side) if phase == "code"]
    assert codes == ["stop", "stop", "stopped", "stopped"]
    assert side.result.phases[-1].started_t < 50  # graded long before the 100 s draws end
    assert not any(stats["loader"].leases.values())


async def test_a_draw_that_finishes_first_is_taken_first() -> None:
    # draw 1 is long (200 tokens) and draw 2 short: in turn draw 1 is taken first, after its
    # 100 s; side by side draw 2 ends first, is taken (nothing to check) and graded while
    # draw 1 goes on, and draws 1 and 3 are dropped
    replies = (UNCHANGED, LONG, RIGHT, LONG)
    turn, side, stats = await add_task_three_draws(replies)

    def first_taken(o: Any) -> str:
        capsule = decode_capsule(o.capsule_json)
        return next(d.text for d in capsule.decisions if d.text.startswith("draw 1 of 3"))

    assert f"seed {resample_seed('add:draw', 1, 1)}:" in first_taken(turn)
    assert turn.result.phases[2].started_t > 100  # draw 1's grade, after its 100 s
    assert first_taken(side) == (
        f"draw 1 of 3 at temperature 0.8 with seed {resample_seed('add:draw', 1, 2)}: "
        "nothing to check; graded in place of attempt 1's candidate"
    )
    assert side.result.passed and (side.result.passed_attempt, side.result.grades) == (1, 1)
    assert side.result.phases[-1].started_t < 50  # graded long before draw 1 would end
    codes = [o for phase, _, o in draw_phases(side) if phase == "code"]
    assert codes == ["stop", "stopped", "stop", "stopped"]
    assert not any(stats["loader"].leases.values())


async def test_no_measured_curve_draws_in_turn() -> None:
    outcome, _, events, _ = await run((WRONG, WRONG2, RIGHT), max_attempts=3, draws=4)
    capsule = decode_capsule(outcome.capsule_json)
    assert not any(d.text.startswith("draws ") for d in capsule.decisions)
    assert not any(
        isinstance(ev, GenerationStarted) and ev.request_id and "." in ev.request_id
        for ev in events
    )


async def test_when_no_draw_passes_the_task_leaves_its_draws_and_goes_on() -> None:
    replies = (WRONG, WRONG, WRONG2, RIGHT)  # the draws: a repeat, then a wrong one
    turn, _, _, _ = await run(replies, max_attempts=3, draws=2)
    side, stats, _, _ = await run(replies, curve=FLAT, max_attempts=3, draws=2)
    for o in (turn, side):
        assert o.result.passed and (o.result.passed_attempt, o.result.grades) == (2, 1)
    assert [p for p in draw_phases(side) if p[2] == "stopped"] == []  # both were taken
    assert not any(stats["loader"].leases.values())


async def test_cancelling_a_task_mid_draws_ends_every_draw_and_frees_the_model() -> None:
    _, stats, events, wall = await run(
        (WRONG, LONG), curve=FLAT, max_attempts=3, draws=4, cancel_after_draws=True
    )
    assert wall < 30  # not the 100 s the draws would have taken
    started = {ev.phase_id for ev in events if type(ev).__name__ == "PhaseStarted"}
    ended = {
        ev.phase_id: getattr(ev, "outcome", "")
        for ev in events
        if type(ev).__name__ == "PhaseFinished"
    }
    assert started == set(ended)  # every phase started was ended
    assert sorted(ended.values()).count("cancelled") == 4  # the four draws
    finished = [ev for ev in events if type(ev).__name__ == "TaskFinished"]
    assert len(finished) == 1 and getattr(finished[0], "error", None) == "cancelled"
    assert stats["router"].tasks_running == 0 and stats["generator"].running == 0
    assert not any(stats["loader"].leases.values())


async def test_draws_that_fail_end_the_task_with_the_reason_as_a_draw_in_turn_does() -> None:
    replies = (WRONG, WRONG2, RIGHT)
    turn, _, _, _ = await run(replies, fail_generations=(1,), max_attempts=3, draws=2)
    side, stats, _, _ = await run(
        replies, curve=FLAT, fail_generations=(1,), max_attempts=3, draws=2
    )
    for o in (turn, side):
        assert not o.result.passed and "llama_decode failed" in (o.result.error or "")
    codes = [o for phase, _, o in draw_phases(side) if phase == "code"]
    assert codes[0] == "stop" and set(codes[1:]) == {"error"}  # each draw's phase, ended
    assert stats["router"].tasks_running == 0 and not any(stats["loader"].leases.values())
