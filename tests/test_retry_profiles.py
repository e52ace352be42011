"""The retry-knob profiles of docs/profiles/: each is the default profile with one change
(``checked``: the reviews it checks, and their check)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from swapos.models.profile import decode_profile

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = decode_profile((ROOT / "swapos/models/default.toml").read_text())
SMALL = {"critic": "small", "fix": "small"}
KNOBS = {
    "focus": {"focus_fix": True},
    "checked": {"critic": True, "check_reviews": True},  # reviews, and their check
    "critic": {"critic": True},
}
PROFILES = {
    "default-small": ({}, SMALL),
    **{name: (knob, {}) for name, knob in KNOBS.items()},
    **{f"{name}-small": (knob, SMALL) for name, knob in KNOBS.items()},
}


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_a_retry_profile_is_the_default_with_one_change(name: str) -> None:
    profile = decode_profile((ROOT / "docs/profiles" / f"{name}.toml").read_text())
    pipeline, roles = PROFILES[name]
    assert profile.pipeline == msgspec.structs.replace(DEFAULT.pipeline, **pipeline)
    assert profile.roles == {**DEFAULT.roles, **roles}
    assert (profile.models, profile.phases, profile.budget) == (
        DEFAULT.models,
        DEFAULT.phases,
        DEFAULT.budget,
    )


def test_every_retry_profile_is_tested() -> None:
    assert {p.stem for p in (ROOT / "docs/profiles").glob("*.toml")} == set(PROFILES)


def test_the_default_profile_reviews_nothing_and_keeps_the_other_knobs_off() -> None:
    # critic off as measured (docs/benchmarks.md, "Do the 1.5B's reviews help?")
    assert (DEFAULT.pipeline.critic, DEFAULT.pipeline.focus_fix) == (False, False)
    assert DEFAULT.pipeline.check_reviews is False
