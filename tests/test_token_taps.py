"""Token taps at the Generator's edge: a caller's tap that has gone, or that raises, never
takes the Generator (and with it a server) down. A slot soak under load found it: a client
hung up, its stream was closed, and the next decoded piece raised ``ClosedResourceError``
inside the Generator, which ended the system."""

from __future__ import annotations

import anyio
from fakes import fake_system

from swapos.backends.fake_script import FakeModelScript
from swapos.data.sampling import SamplingParams
from swapos.messages.commands import PhaseSpec
from swapos.testing import FakeClock

SCRIPTS = {"a": FakeModelScript(reply="one two three four five six", load_s=1.0, token_s=0.5)}


def phase() -> PhaseSpec:
    return PhaseSpec(phase="chat", model="a", prompt="hi", params=SamplingParams(max_tokens=6))


async def test_a_tap_that_raises_loses_its_pieces_not_the_system() -> None:
    clock, seen = FakeClock(), list[str]()

    def closed_after_two(piece: str) -> None:
        if len(seen) == 2:
            raise anyio.ClosedResourceError  # as a closed stream's send_nowait does
        seen.append(piece)

    with anyio.fail_after(30):
        async with clock.autojump(), fake_system(SCRIPTS, budget=100, clock=clock) as (system, _):
            first = await system.generate("t1", phase(), on_token=closed_after_two)
            again = await system.generate("t2", phase())  # the system is still serving
    assert first.error is None and first.outputs == ["one two three four five six"]
    assert len(seen) == 2  # the tap is dropped after it raised
    assert again.outputs == first.outputs


async def test_a_caller_cancelled_mid_answer_is_never_called_again() -> None:
    """The tap is looked up per piece: once the cancelled caller has removed it, the pieces
    decoded before the cancellation reaches the generation go nowhere."""
    clock, seen = FakeClock(), list[str]()
    with anyio.fail_after(30):
        async with clock.autojump(), fake_system(SCRIPTS, budget=100, clock=clock) as (system, _):
            with anyio.CancelScope() as scope:

                def tap(piece: str) -> None:
                    seen.append(piece)
                    if len(seen) == 2:
                        scope.cancel()  # the client hangs up

                await system.generate("t1", phase(), on_token=tap)
            after = len(seen)
            await clock.sleep(10)  # whatever the generation still decodes
            again = await system.generate("t2", phase())
    assert scope.cancelled_caught and after == len(seen) == 2
    assert again.outputs == ["one two three four five six"]
