"""A read-only ``~/.cache/swapos`` with the models present is used, not a traceback; a write
it cannot take (a model to build) is an error saying what to do, exit 2 from the CLI."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import anyio
import pytest

from swapos import run
from swapos.actors.system import open_system
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.data.sampling import SamplingParams
from swapos.errors import ModelFileError
from swapos.messages.commands import PhaseSpec
from swapos.messages.events import AnyEvent, KVDropped, KVHit, KVSaved
from swapos.models import atomic
from swapos.models.bundled import bundled_model_path
from swapos.models.digests import sha256_file
from swapos.models.spec import ModelSpec
from swapos.testing import FakeClock
from tests.fakes import fake_profile
from tests.readonly import read_only

SOURCE = "gemma3-270m-q4_k_m"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$XDG_CACHE_HOME`` in ``tmp_path``, holding a verified (small, fake) Gemma file."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    models = tmp_path / "swapos" / "models"
    models.mkdir(parents=True)
    path = models / f"{SOURCE}.gguf"
    path.write_bytes(os.urandom(4096))
    stat = path.stat()
    manifest = {SOURCE: {"size": 4096, "mtime_ns": stat.st_mtime_ns, "sha256": sha256_file(path)}}
    (models / "manifest.json").write_text(json.dumps(manifest))
    (models / ".lock").touch()
    return models


def test_a_verified_model_is_served_from_a_read_only_cache(cache: Path) -> None:
    manifest = (cache / "manifest.json").read_bytes()
    with read_only(cache.parent):
        assert bundled_model_path(SOURCE) == cache / f"{SOURCE}.gguf"
    assert (cache / "manifest.json").read_bytes() == manifest


def test_a_read_only_cache_without_a_lock_file_still_serves(cache: Path) -> None:
    (cache / ".lock").unlink()
    with read_only(cache.parent):
        assert bundled_model_path(SOURCE) == cache / f"{SOURCE}.gguf"


def test_a_moved_mtime_is_rechecked_by_digest_even_when_the_manifest_cannot_be_saved(
    cache: Path,
) -> None:
    path = cache / f"{SOURCE}.gguf"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    with read_only(cache.parent):
        assert bundled_model_path(SOURCE) == path  # same digest: still the verified file


def test_a_model_to_build_in_a_read_only_cache_says_what_to_do(cache: Path) -> None:
    pytest.importorskip("llama_cpp")
    with read_only(cache.parent), pytest.raises(ModelFileError) as info:
        bundled_model_path("gemma3-270m-q8_0")  # derived from the source: must be written
    message = str(info.value)
    assert "cannot build gemma3-270m-q8_0.gguf in the model cache" in message
    assert "Read-only file system" in message or "Permission denied" in message
    assert "XDG_CACHE_HOME" in message
    assert not list(cache.glob(".*.tmp"))


def test_a_cache_that_cannot_be_created_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    with read_only(tmp_path / "cache"), pytest.raises(ModelFileError, match="create the folder"):
        bundled_model_path(SOURCE)


def test_a_full_disk_while_building_says_what_to_do(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC cannot be made for real in a test: injected where the build's file is made."""
    (cache / f"{SOURCE}.gguf").unlink()

    def full(*, prefix: str, suffix: str, dir: Path) -> tuple[int, str]:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dir / (prefix + suffix)))

    monkeypatch.setattr(atomic.tempfile, "mkstemp", full)
    with pytest.raises(ModelFileError, match=r"No space left on device.*give it room"):
        bundled_model_path(SOURCE)


def test_the_cli_exits_2_with_the_reason_when_the_cache_cannot_build(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("llama_cpp")
    out = tmp_path / "out"
    with read_only(cache.parent):
        code = run.main(["--profile", "tiny", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == run.EXIT_ERROR
    assert "cannot build" in printed and "XDG_CACHE_HOME" in printed
    assert "Traceback" not in printed
    assert "cannot build" in json.loads((out / "result.json").read_text())["error"]


STABLE = "You are a careful coder. Here is the brief and the starter code. " * 2
SCRIPTS = {"a": FakeModelScript(load_s=1.0, prefill_s_per_token=0.01, reply="x y")}


def phase(tail: str) -> PhaseSpec:
    return PhaseSpec(
        phase="code",
        model="a",
        prompt=STABLE + tail,
        stable_prefix=STABLE,
        params=SamplingParams(max_tokens=4),
    )


async def _run_on_disk(disk: Path, tails: list[str], *, read_only: bool) -> list[AnyEvent]:
    clock = FakeClock()
    seen: list[AnyEvent] = []
    backend = FakeBackend(clock, SCRIPTS)
    specs = {"a": ModelSpec(name="a", path="/nonexistent/a.gguf")}
    with anyio.fail_after(10):
        async with (
            clock.autojump(),
            open_system(
                fake_profile(["a"]), backend=backend, specs=specs, clock=clock,
                budget_bytes=200, kv_disk_dir=disk, on_event=seen.append,
            ) as sys,
        ):  # fmt: skip
            for i, tail in enumerate(tails):
                out = await sys.run_phases(f"t{i}", [phase(tail)])
                assert out.error is None
            assert sys.statistics()["kvcache"].disk_read_only == read_only
    return seen


@pytest.mark.anyio
async def test_a_read_only_kv_disk_tier_serves_its_states_and_saves_to_ram_only(
    tmp_path: Path,
) -> None:
    disk = tmp_path / "kv"
    written = await _run_on_disk(disk, ["attempt 1"], read_only=False)
    assert [e.tier for e in written if isinstance(e, KVSaved)] == ["ram+disk"]
    before = sorted(p.name for p in disk.rglob("*"))
    with read_only(disk):
        seen = await _run_on_disk(disk, ["attempt 2", "attempt 3"], read_only=True)
    assert next(e.tier for e in seen if isinstance(e, KVHit)) == "disk"  # the old state served
    dropped = [e for e in seen if isinstance(e, KVDropped)]
    assert len(dropped) == 1 and "read-only" in dropped[0].reason  # said once, then RAM only
    assert {e.tier for e in seen if isinstance(e, KVSaved)} == {"ram"}
    assert sorted(p.name for p in disk.rglob("*")) == before
