"""Backend failures are mapped to SwapOS errors at the backend's edge: a failing decode fails
its phase with the reason, and the same system goes on serving (fake backend, virtual time)."""

from __future__ import annotations

import anyio
import pytest

from swapos.backends.errors import LIBRARY_ERRORS, ExceptionTypes, map_exceptions
from swapos.backends.fake_script import FakeModelScript
from swapos.data.sampling import SamplingParams
from swapos.errors import GenerationError, ModelFileError, SwapOSError
from swapos.messages.commands import PhaseSpec
from swapos.messages.events import AnyEvent, GenerationFailed, GenerationFinished
from swapos.testing import FakeClock
from tests.fakes import fake_system


def phase(model: str) -> PhaseSpec:
    return PhaseSpec(phase="code", model=model, prompt="p", params=SamplingParams(max_tokens=8))


@pytest.mark.anyio
async def test_a_failing_decode_fails_its_phase_and_the_system_serves_the_next() -> None:
    clock = FakeClock()
    scripts = {"a": FakeModelScript(load_s=1.0, reply="fine answer", fail_generations=(1,))}
    seen: list[AnyEvent] = []
    with anyio.fail_after(10):
        async with (
            clock.autojump(),
            fake_system(scripts, budget=100, clock=clock, on_event=seen.append) as (sys, fb),
        ):
            first = await sys.run_phases("t1", [phase("a")])
            failed = await sys.run_phases("t2", [phase("a")])
            after = await sys.run_phases("t3", [phase("a"), phase("a")])
    assert first.error is None and first.outputs == ["fine answer"]
    assert failed.error is not None
    assert "generating with model 'a' failed: llama_decode failed with status -3" in failed.error
    assert [r.outcome for r in failed.records] == ["error"]
    assert after.error is None and after.outputs == ["fine answer", "fine answer"]
    assert fb.loads == ["a"]  # the model stayed loaded through the failure
    (event,) = [e for e in seen if isinstance(e, GenerationFailed)]
    assert event.task_id == "t2" and "llama_decode failed" in event.reason
    assert sum(isinstance(e, GenerationFinished) for e in seen) == 3


def test_a_library_error_becomes_the_mapped_swapos_error_with_its_cause() -> None:
    original = RuntimeError("llama_decode failed with status -3")
    with (
        pytest.raises(GenerationError) as info,
        map_exceptions({LIBRARY_ERRORS: GenerationError}, "generating with 'a'", advice="retry"),
    ):
        raise original
    assert (
        str(info.value) == "generating with 'a' failed: llama_decode failed with status -3; retry"
    )
    assert info.value.__cause__ is original


def test_the_first_matching_mapping_wins() -> None:
    mapping: dict[ExceptionTypes, type[SwapOSError]] = {
        OSError: ModelFileError,
        LIBRARY_ERRORS: GenerationError,
    }
    with (
        pytest.raises(ModelFileError, match="loading x failed: FileNotFoundError"),
        map_exceptions(mapping, "loading x"),
    ):
        raise FileNotFoundError
    with pytest.raises(GenerationError), map_exceptions(mapping, "decoding"):
        raise ValueError("bad")


@pytest.mark.parametrize(
    "exc",
    [KeyError("bug"), AssertionError("bug"), ModelFileError("already ours")],
    ids=["bug", "assertion", "swapos-error"],
)
def test_bugs_and_swapos_errors_pass_through_unchanged(exc: Exception) -> None:
    with (
        pytest.raises(type(exc)) as info,
        map_exceptions({LIBRARY_ERRORS: GenerationError}, "generating"),
    ):
        raise exc
    assert info.value is exc
