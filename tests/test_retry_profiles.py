"""The profiles of docs/profiles/: each is the default profile with one change, and writes
no ``[pipeline]`` setting the default already has."""

from __future__ import annotations

import tomllib
from pathlib import Path

import msgspec
import pytest

from swapos.models.profile import REMOVED_PIPELINE_FIELDS, PipelineConfig, decode_profile

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = decode_profile((ROOT / "swapos/models/default.toml").read_text())
PROFILES = {"default-small": {"fix": "small"}}
"""Each profile's roles that differ from the default's."""


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_a_docs_profile_is_the_default_with_one_change(name: str) -> None:
    profile = decode_profile((ROOT / "docs/profiles" / f"{name}.toml").read_text())
    assert profile.roles == {**DEFAULT.roles, **PROFILES[name]}
    assert (profile.models, profile.phases, profile.budget, profile.pipeline) == (
        DEFAULT.models,
        DEFAULT.phases,
        DEFAULT.budget,
        DEFAULT.pipeline,
    )


def test_every_docs_profile_is_tested() -> None:
    assert {p.stem for p in (ROOT / "docs/profiles").glob("*.toml")} == set(PROFILES)


def test_no_profile_shipped_sets_a_removed_field() -> None:
    shipped = [ROOT / "swapos/models/default.toml", *(ROOT / "docs/profiles").glob("*.toml")]
    for path in shipped:
        pipeline = tomllib.loads(path.read_text()).get("pipeline", {})
        assert not set(pipeline) & set(REMOVED_PIPELINE_FIELDS), path


def test_the_default_profile_is_the_one_source_of_pipeline_defaults() -> None:
    written = tomllib.loads((ROOT / "swapos/models/default.toml").read_text())["pipeline"]
    assert set(written) == {f.name for f in msgspec.structs.fields(PipelineConfig)}
    assert DEFAULT.pipeline == PipelineConfig()
