"""Nothing becomes public by accident: the names swapos exports are exactly these."""

from __future__ import annotations

import swapos

PUBLIC = {
    "MODES",
    "PhasesOutcome",
    "System",
    "SystemStatistics",
    "TaskOutcome",
    "open_system",
    "GenerationOutput",
    "GenerationStats",
    "LoadedModel",
    "ModelBackend",
    "SamplingParams",
    "ModelState",
    "ModelsUnloaded",
    "PrefetchPolicy",
    "Clock",
    "MonotonicClock",
    "CapsuleError",
    "EventLogError",
    "GenerationError",
    "ModelFileError",
    "ProfileError",
    "SwapOSError",
    "SystemClosedError",
    "TaskError",
    "TemplateError",
    "PhaseSpec",
    "EVENT_DECODER",
    "AnyEvent",
    "default_profile",
    "Profile",
    "decode_profile",
    "load_profile",
    "ModelSpec",
    "ChatFormat",
    "Task",
    "load_suite",
    "load_task",
    "PhaseRecord",
    "RunSummary",
    "TaskResult",
}


def test_public_names_are_exactly_the_documented_ones() -> None:
    import types

    exported = {
        n
        for n, v in vars(swapos).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    assert exported == PUBLIC


def test_every_error_is_a_swapos_error() -> None:
    for name in PUBLIC:
        obj = getattr(swapos, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, swapos.SwapOSError)
