"""The pipeline and the swap engine on the real bundled Gemma models (short generations)."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest

from swapos.actors.system import open_system
from swapos.capsule.schema import decode_capsule
from swapos.data.sampling import SamplingParams
from swapos.data.task import Task, TaskMeta
from swapos.messages.commands import PhaseSpec
from swapos.messages.events import (
    EVENT_DECODER,
    AnyEvent,
    GenerationFinished,
    GenerationStarted,
    ModelLoaded,
    ModelLoadStarted,
)
from swapos.models.bundled import builtin_profile
from swapos.models.profile import PhaseConfig, PipelineConfig, Profile
from swapos.sysinfo import peak_rss_bytes, rss_bytes
from tests.fakes import PLAIN

pytestmark = [pytest.mark.anyio, pytest.mark.real_model]

ADD = Task(
    meta=TaskMeta(task_id="complete_add", category="completion", difficulty=1),
    root="",
    problem='def add(a, b):\n    """Return the sum of a and b."""\n',
    starter='def add(a, b):\n    """Return the sum of a and b."""\n',
    tests={
        "test_add.py": "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    },
    entry_point="add",
)
IMPOSSIBLE = Task(
    meta=TaskMeta(task_id="impossible", category="bugfix", difficulty=1),
    root="",
    problem="Make `answer()` return the secret number.",
    starter="def answer():\n    return 0\n",
    tests={
        "test_answer.py": "from solution import answer\n\n\ndef test_answer():\n"
        "    assert answer() == 'never-guessable-7f3a'\n"
    },
)


def short_profile(max_attempts: int) -> Profile:
    base = builtin_profile("tiny")
    phases = {
        name: PhaseConfig(max_tokens=tokens, stop=list(base.phase(name).stop))
        for name, tokens in (("reason", 16), ("code", 48))
    }
    return msgspec.structs.replace(
        base,
        phases=phases,
        # No pre-grade checks: these tests follow the grade -> retry path (a
        # candidate that leaves the starter unchanged would go back without a grade).
        pipeline=PipelineConfig(
            **{**PLAIN, "max_attempts": max_attempts, "skip_reason_max_difficulty": 1},
            selfcheck=False,
        ),
    )


async def test_task_passing_first_attempt_ends_after_one_grade() -> None:
    with anyio.fail_after(300):
        async with open_system(short_profile(2)) as system:
            outcome = await system.run_task(ADD)
    result = outcome.result
    assert result.passed and result.pass_at_1 and result.iterations == 1
    assert [p.phase for p in result.phases] == ["code", "grade"]


async def test_a_failing_attempt_is_retried_with_its_test_output() -> None:
    with anyio.fail_after(300):
        async with open_system(short_profile(2)) as system:
            outcome = await system.run_task(IMPOSSIBLE)
    result = outcome.result
    assert not result.passed and result.iterations == 2
    phases = [p.phase for p in result.phases]
    # The retry either writes a new candidate (graded) or repeats the first one, is
    # resampled, and is graded only if the resample differs: never the same code twice.
    assert phases[:3] == ["code", "grade", "code"]
    assert set(phases[3:]) <= {"code", "grade"} and phases.count("grade") == result.grades
    capsule = decode_capsule(outcome.capsule_json)
    assert {f.source for f in capsule.feedback} == {"grader"}
    # Honest accounting: the phases cover the task's wall time; what is left is building
    # prompts between phases (stated tolerance: 0.5 s + 5%).
    phases_s = sum(p.total_s for p in result.phases)
    assert phases_s <= result.wall_clock_s
    assert result.wall_clock_s - phases_s <= 0.5 + 0.05 * result.wall_clock_s
    # The retry re-read only its new suffix: the stable prefix came from the KV cache.
    retry = result.phases[2]
    assert retry.kv_restored_tokens > 0
    assert retry.prefill_tokens < retry.prompt_tokens


async def test_three_models_swap_under_a_budget_that_holds_two() -> None:
    profile = builtin_profile("tiny")
    seen: list[AnyEvent] = []
    params = SamplingParams(max_tokens=24)
    sequence = ["planner", "coder", "critic", "coder", "critic", "planner"]
    phases = [
        PhaseSpec(phase=f"p{i}", model=m, prompt="def fibonacci(n):\n", params=params)
        for i, m in enumerate(sequence)
    ]
    with anyio.fail_after(300):
        async with open_system(profile, on_event=seen.append) as system:
            out = await system.run_phases("swap", phases)
            summary = system.summary()
    assert out.error is None
    assert summary.evictions >= 1  # all three cannot be resident at once
    resident_peak = system.statistics()["loader"].peak_used_bytes
    assert resident_peak <= system.budget_bytes
    # A prefetch (speculative load) ran while another model was generating.
    gens: list[tuple[float, float, str | None]] = []
    started: dict[str | None, float] = {}
    for ev in seen:
        if isinstance(ev, GenerationStarted):
            started[ev.request_id] = ev.t
        elif isinstance(ev, GenerationFinished):
            gens.append((started[ev.request_id], ev.t, ev.model))
    loads: list[tuple[float, float, str | None]] = []  # each speculative load's span
    starts: dict[str | None, float] = {}
    for ev in seen:
        if isinstance(ev, ModelLoadStarted) and ev.speculative:
            starts[ev.model] = ev.t
        elif isinstance(ev, ModelLoaded) and ev.speculative:
            loads.append((starts.pop(ev.model), ev.t, ev.model))
    overlapping = [
        (l0, l1, model)
        for l0, l1, model in loads
        if any(g0 < l1 and l0 < g1 and m != model for g0, g1, m in gens)
    ]
    assert overlapping, f"no prefetch overlapped a generation: loads {loads}, gens {gens}"
    assert summary.load_hidden_fraction > 0
    assert peak_rss_bytes() > 0


async def test_load_generate_evict_is_in_the_log_and_rss_returns(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    spec = PhaseSpec(
        phase="gen", model="coder", prompt="def add(a, b):\n", params=SamplingParams(max_tokens=8)
    )
    with anyio.fail_after(300):
        async with open_system(builtin_profile("tiny"), event_log=log) as system:
            before = rss_bytes()  # tokenizers are read at startup and stay
            out = await system.run_phases("one", [spec])
            during = rss_bytes()
    after = rss_bytes()
    assert out.error is None and out.outputs[0]
    kinds = [type(EVENT_DECODER.decode(line)).__name__ for line in log.read_bytes().splitlines()]
    for kind in ("ModelLoaded", "GenerationFinished", "ModelEvicted", "RunFinished"):
        assert kind in kinds
    assert (
        kinds.index("ModelLoaded") < kinds.index("GenerationFinished") < kinds.index("ModelEvicted")
    )
    assert during - before > 200 * 2**20  # the Q8_0 coder was really resident
    assert after - before < 64 * 2**20  # and its memory went back after eviction


WRONG_DOC = (
    'def add(a, b):\n    """Return the sum of a and b.\n\n    >>> add(2, 3)\n    6\n    """\n'
)
WRONG_EXAMPLE = Task(
    meta=TaskMeta(task_id="complete_add_wrong_example", category="completion", difficulty=1),
    root="",
    problem=WRONG_DOC,
    starter=WRONG_DOC,
    tests={
        "test_add.py": "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    },
    entry_point="add",
)


async def test_draws_decode_side_by_side_on_a_flat_measured_curve(tmp_path: Path) -> None:
    """A pinned flat cost curve (a GPU's) makes the draws policy choose side by side: the
    real model's draws of the failed first attempt decode as sequences of one context, each
    a phase of its own, and every phase started is ended."""
    curve = tmp_path / "flat.json"
    curve.write_text('{"verify_ratio": [1.0, 1.0, 1.0, 1.0]}')
    base = short_profile(2)
    models = {
        **base.models,
        "coder": msgspec.structs.replace(base.models["coder"], draft=str(curve)),
    }
    pipeline = msgspec.structs.replace(base.pipeline, selfcheck=True, draws=3)
    profile = msgspec.structs.replace(base, models=models, pipeline=pipeline)
    seen: list[AnyEvent] = []
    with anyio.fail_after(300):
        async with open_system(profile, on_event=seen.append) as system:
            outcome = await system.run_task(WRONG_EXAMPLE)
            stats = system.statistics()
    capsule = decode_capsule(outcome.capsule_json)
    plans = [d.text for d in capsule.decisions if d.text.startswith("draws 3 from here")]
    assert len(plans) == 1 and "3 side by side" in plans[0], capsule.decisions
    drawn = [
        ev.request_id
        for ev in seen
        if isinstance(ev, GenerationStarted) and ev.request_id and "." in ev.request_id
    ]
    assert len(drawn) == 3 and len({r.rsplit(".", 1)[0] for r in drawn}) == 1
    ended = [p for p in outcome.result.phases if p.phase == "code" and p.attempt == 1]
    assert len(ended) == 4  # the attempt and its 3 draws
    assert all(p.outcome and p.outcome != "error" for p in ended), ended
    assert not any(stats["loader"].leases.values())
