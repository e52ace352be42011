"""Every decision the pipeline makes reaches both records: the event log and the capsule."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from swapos.capsule.schema import decode_capsule
from swapos.messages.events import RouterDecided
from swapos.testing import FakeClock
from tests.fakes import fake_system
from tests.test_conductor import TASK, UNCHANGED, profile, scripts

pytestmark = pytest.mark.anyio


async def run_logged(replies: tuple[str, ...], **pipeline: Any):  # type: ignore[no-untyped-def]
    events: list[RouterDecided] = []

    def on_event(event: object) -> None:
        if isinstance(event, RouterDecided):
            events.append(event)

    clock = FakeClock()
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            fake_system(
                scripts(replies), budget=300, clock=clock, profile=profile(**pipeline),
                on_event=on_event,
            ) as (sys, _),
        ):  # fmt: skip
            outcome = await sys.run_task(TASK)
    capsule = decode_capsule(outcome.capsule_json)
    logged = [(e.decision, e.text) for e in events]
    return logged, [(d.phase, d.text) for d in capsule.decisions]


async def test_the_decision_that_a_candidate_is_unchanged_is_in_the_capsule_too() -> None:
    logged, kept = await run_logged((UNCHANGED, "def add(a, b):\n    return a + b\n```"))
    said = [d for d in logged if d[0] == "selfcheck"]
    assert said and said[0][1].startswith("the answer is solution.py unchanged")
    assert kept == logged


async def test_the_decision_that_an_answer_has_no_code_is_in_the_capsule_too() -> None:
    logged, kept = await run_logged(("",), max_attempts=1)
    assert ("grade", "the model produced no code (empty or prose-only answer)") in logged
    assert kept == logged
