"""Profile decoding, size strings, the bundled models and the embedded default profile."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from swapos.errors import ProfileError
from swapos.models import bundled
from swapos.models.bundled import (
    BUNDLED_NAMES,
    builtin_profile,
    bundled_model_path,
    default_profile,
    resolve_profile,
)
from swapos.models.digests import sha256_file
from swapos.models.gguf import read_gguf
from swapos.models.profile import Profile, decode_profile, parse_size
from swapos.models.resolve import model_specs
from swapos.policies.memory import estimate_footprint

VALID = """
name = "two"
budget = "800MB"
[models.big]
path = "/models/big.gguf"
n_ctx = 4096
[models.small]
bundled = "gemma3-270m-q4_k_m"
[roles]
reason = "big"
critic = "small"
[phases.reason]
max_tokens = 100
stop = ["END"]
"""


def test_a_valid_profile_decodes() -> None:
    profile = decode_profile(VALID)
    assert profile.models["big"].n_ctx == 4096 and profile.models["big"].n_batch == 128
    assert profile.roles == {"reason": "big", "critic": "small"}
    assert profile.phase("reason").stop == ["END"] and profile.phase("code").max_tokens == 256
    assert parse_size(profile.budget) == 800_000_000


def test_an_unknown_field_is_an_error_naming_it_and_its_table() -> None:
    with pytest.raises(ProfileError, match=r"n_ctxx` - at `\$\.models\.big`"):
        decode_profile(VALID.replace("n_ctx = 4096", "n_ctxx = 4096"))


@pytest.mark.parametrize(
    "field",
    ["critic", "check_reviews", "focus_fix", "edit", "redraw_unchanged", "draws_stop_repeats"],
)
def test_a_removed_pipeline_field_is_an_error_naming_it_as_removed(field: str) -> None:
    with pytest.raises(ProfileError, match=rf"`pipeline\.{field}` was removed: measured not"):
        decode_profile(VALID + f"[pipeline]\n{field} = false\n")


@pytest.mark.parametrize("field", ["restore_dropped", "precheck_defects", "open_asked"])
def test_a_knob_that_is_a_pass_now_is_an_error_naming_the_pass(field: str) -> None:
    with pytest.raises(
        ProfileError, match=rf"`pipeline\.{field}` was removed: it is the `{field}`"
    ):
        decode_profile(VALID + f"[pipeline]\n{field} = false\n")


def test_a_profile_names_the_passes_it_runs_and_an_unknown_one_is_an_error() -> None:
    assert decode_profile(VALID + "[pipeline]\npasses = []\n").pipeline.passes == []
    named = decode_profile(VALID + '[pipeline]\npasses = ["examples"]\n')
    assert named.pipeline.passes == ["examples"]
    with pytest.raises(ProfileError, match=r"pipeline\.passes\[0\]"):
        decode_profile(VALID + '[pipeline]\npasses = ["critic"]\n')


def test_a_wrong_type_is_an_error_naming_the_field() -> None:
    with pytest.raises(ProfileError, match=r"at `\$\.models\.big\.n_ctx`"):
        decode_profile(VALID.replace("n_ctx = 4096", 'n_ctx = "big"'))


def test_a_role_naming_no_model_is_an_error() -> None:
    with pytest.raises(ProfileError, match=r"roles\.reason"):
        decode_profile(VALID.replace('reason = "big"', 'reason = "huge"'))


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1.5GiB", 3 * 2**29), ("800MB", 800_000_000), ("512 kib", 512 * 1024), ("42", 42)],
)
def test_size_strings(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["lots", "1.5 parsecs", "-3GB", ""])
def test_bad_size_strings_are_errors_naming_the_field(text: str) -> None:
    with pytest.raises(ProfileError, match="`budget`"):
        parse_size(text)


def test_an_unknown_bundled_name_lists_the_bundled_models() -> None:
    with pytest.raises(ProfileError, match="gemma3-270m-q8_0"):
        bundled_model_path("gemma3-270m-q2_k")


def test_a_manifest_entry_is_trusted_only_while_size_and_digest_match(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"abc")
    stat = path.stat()
    entry = {"size": 3, "mtime_ns": stat.st_mtime_ns, "sha256": sha256_file(path)}
    assert bundled._verified(path, dict(entry))
    assert not bundled._verified(path, {**entry, "size": 4})
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    touched = dict(entry)
    assert bundled._verified(path, touched)  # digest recomputed, still the same bytes
    assert touched["mtime_ns"] == stat.st_mtime_ns + 10**9
    path.write_bytes(b"abd")
    assert not bundled._verified(path, dict(entry))
    assert not bundled._verified(tmp_path / "gone.gguf", dict(entry))


@pytest.mark.real_model
def test_the_default_profile_runs_two_real_instruct_coder_models() -> None:
    profile = default_profile()
    assert set(profile.roles) == {"reason", "code", "fix", "open"}
    specs = model_specs(profile)
    paths = {specs[m].path for m in profile.roles.values()}
    assert len(paths) == 2
    for path in paths:
        meta = read_gguf(path).metadata
        assert "Qwen2.5 Coder" in str(meta["general.name"])
        assert "tokenizer.chat_template" in meta
    assert profile.roles["code"] != profile.roles["fix"]
    assert profile.roles["open"] == profile.roles["fix"]  # the 1.5B writes opened first answers


def _footprints(profile: Profile) -> list[int]:
    footprints = []
    for spec in model_specs(profile).values():
        info = read_gguf(spec.path)
        footprints.append(
            estimate_footprint(info.file_size, info, n_ctx=spec.n_ctx, n_batch=spec.n_batch)
        )
    return footprints


@pytest.mark.real_model
def test_the_default_budget_holds_either_model_but_not_both() -> None:
    profile = default_profile()
    budget = parse_size(profile.budget)
    footprints = _footprints(profile)
    assert all(f < 0.9 * budget for f in footprints)
    assert sum(footprints) > budget


@pytest.mark.real_model
def test_the_tiny_profile_resolves_to_three_files_of_increasing_size() -> None:
    profile = builtin_profile("tiny")
    assert set(profile.roles) == {"reason", "code", "critic"}
    specs = model_specs(profile)
    paths = [specs[profile.roles[role]].path for role in ("critic", "code", "reason")]
    sizes = [Path(p).stat().st_size for p in paths]
    assert len(set(paths)) == 3 and sizes == sorted(sizes) and len(set(sizes)) == 3
    assert profile.phase("reason").max_tokens < profile.phase("code").max_tokens
    assert {cfg.prompt for cfg in profile.models.values()} == {"completion"}


@pytest.mark.real_model
def test_the_tiny_budget_holds_any_two_models_but_not_three() -> None:
    profile = builtin_profile("tiny")
    budget = parse_size(profile.budget)
    footprints = _footprints(profile)
    assert all(a + b < 0.9 * budget for a, b in itertools.combinations(footprints, 2))
    assert sum(footprints) > budget


def test_builtin_profiles_are_named_on_the_command_line(tmp_path: Path) -> None:
    assert resolve_profile(None).name == default_profile().name
    assert resolve_profile("tiny").name.startswith("tiny")
    with pytest.raises(ProfileError, match="no builtin profile 'huge'"):
        builtin_profile("huge")
    path = tmp_path / "p.toml"
    path.write_text('name = "mine"\n[models.a]\npath = "a.gguf"\n')
    assert resolve_profile(str(path)).name == "mine"


@pytest.mark.real_model
def test_bundled_models_are_reused_not_rebuilt() -> None:
    first = {name: bundled_model_path(name).stat().st_mtime_ns for name in BUNDLED_NAMES}
    again = {name: bundled_model_path(name).stat().st_mtime_ns for name in BUNDLED_NAMES}
    assert first == again


def test_temp_files_of_a_killed_build_are_removed(tmp_path: Path) -> None:
    stale = tmp_path / ".gemma3-270m-f16.gguf.abc123.tmp"
    stale.write_bytes(b"half a model")
    keep = tmp_path / "gemma3-270m-f16.gguf"
    keep.write_bytes(b"a model")
    assert bundled.remove_stale_temps(tmp_path) == [stale]
    assert not stale.exists() and keep.exists()
