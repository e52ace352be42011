"""Hostile probes of the KV disk tier (issue 56): truncated, corrupted, foreign-model,
older-format, zero-length and crafted state files, names that are not ours, files that are
not regular files, a full disk, and two caches sharing one folder.

Each must be a miss and a warning (a ``KVMiss``/``KVDropped`` with the reason, a
``kv_disk.*`` log line), never a wrong restore, a crash of the KVCache actor or a hang.
They run through the KVCache actor (on asyncio and trio), as a server uses it.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from swapos.data.prefix import PrefixState
from swapos.kvstore import state_file as sf
from swapos.kvstore.disk import DiskStore
from swapos.kvstore.state_file import MAGIC, SUFFIX
from swapos.messages.commands import SavePrefix
from swapos.messages.events import KVDropped, KVHit, KVMiss, KVSaved
from tests.test_kvcache import ID, kvcache, of

pytestmark = pytest.mark.anyio

OTHER = "model-b;n_ctx=2048"
TOKENS = [1, 2, 3]
PROMPT = [1, 2, 3, 4]


def state_files(root: Path, pattern: str = f"*{SUFFIX}") -> list[Path]:
    return sorted(root.glob(f"*/{pattern}"))


def craft(
    root: Path,
    identity: str,
    tokens: list[int],
    payload: bytes,
    *,
    magic: bytes = MAGIC,
    into: str | None = None,
    **header: Any,
) -> Path:
    """A state file written by hand: ``header`` overrides the fields a true one would hold;
    ``into``: the identity whose folder it lands in (default ``identity``'s)."""
    packed = sf.token_bytes(tokens)
    fields: dict[str, Any] = {
        "version": sf.FORMAT_VERSION,
        "identity": identity,
        "n_tokens": len(tokens),
        "tokens_hash": sf.digest(packed),
        "payload_len": len(payload),
        "payload_hash": sf.digest(payload, 32),
        **header,
    }
    head = json.dumps(fields).encode()
    folder = root / sf.digest((into or identity).encode())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / sf.file_name(len(tokens), packed)
    path.write_bytes(magic + sf.LENGTH.pack(len(head)) + head + packed + payload)
    return path


def good(root: Path) -> Path:
    return craft(root, ID, TOKENS, b"good state")


async def lookup_after(root: Path) -> tuple[Any, Any, list[MutableMapping[str, Any]]]:
    """A fresh KVCache on ``root`` looks up ``PROMPT``: (hit or None, harness, log lines)."""
    with capture_logs() as logs, anyio.fail_after(10):
        async with kvcache(disk_dir=root) as kv:
            hit = await kv.lookup(ID, PROMPT)
    return hit, kv, logs


async def save(kv: Any, identity: str, tokens: list[int], payload: bytes) -> None:
    state = PrefixState(tokens=tuple(tokens), state=payload)
    await kv._inbox.send(SavePrefix(identity=identity, state=state, model="a"))


def warned(logs: Sequence[Mapping[str, Any]]) -> list[str]:
    return [e["event"] for e in logs if e["log_level"] == "warning"]


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "zero-length": lambda b: b"",
    "magic-only": lambda b: b[:8],
    "mid-header": lambda b: b[:20],
    "mid-tokens": lambda b: b[: len(b) - len(b"good state") - 4],
    "mid-payload": lambda b: b[:-3],
    "bitflip-payload": lambda b: b[:-1] + bytes([b[-1] ^ 1]),
    "bitflip-tokens": lambda b: b[: -len(b"good state") - 1] + b"\x7f" + b[-len(b"good state") :],
    "bitflip-header": lambda b: b.replace(b'"n_tokens": 3', b'"n_tokens": 2'),
    "appended": lambda b: b + b"\0" * 16,
    "older-magic": lambda b: b"SWAPKV00" + b[8:],
    "header-length-huge": lambda b: b[:8] + sf.LENGTH.pack(2**32 - 1) + b[12:],
}


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
async def test_a_damaged_state_file_is_a_miss_a_warning_and_deleted(
    tmp_path: Path, damage: str
) -> None:
    path = good(tmp_path)
    path.write_bytes(DAMAGE[damage](path.read_bytes()))
    hit, kv, logs = await lookup_after(tmp_path)
    assert hit is None
    (miss,) = of(kv.seen, KVMiss)
    assert "rejected on disk" in miss.reason and path.name in miss.reason
    assert "kv_disk.rejected" in warned(logs)
    assert not path.exists()


HEADERS: dict[str, dict[str, Any]] = {
    "older-version": {"version": 0},
    "newer-version": {"version": 99},
    "n_tokens-huge": {"n_tokens": 2**40},
    "n_tokens-enormous": {"n_tokens": 2**62},
    "n_tokens-negative": {"n_tokens": -3},
    "n_tokens-text": {"n_tokens": "3"},
    "payload_len-lies": {"payload_len": 10**12},
    "payload_hash-lies": {"payload_hash": "0" * 64},
    "fields-missing": {"payload_hash": None},
}


@pytest.mark.parametrize("header", list(HEADERS), ids=list(HEADERS))
async def test_a_crafted_header_is_a_miss_never_a_crash(tmp_path: Path, header: str) -> None:
    path = craft(tmp_path, ID, TOKENS, b"crafted", **HEADERS[header])
    hit, kv, logs = await lookup_after(tmp_path)
    assert hit is None
    assert len(of(kv.seen, KVMiss)) == 1
    assert "kv_disk.rejected" in warned(logs)
    assert not path.exists()
    assert kv.actor.statistics().disk_rejected == 1


async def test_a_foreign_models_state_is_never_restored(tmp_path: Path) -> None:
    """Another model's state for the same tokens, placed in this model's folder under the
    right name (a copied cache, a hash collision): refused by the header, deleted."""
    path = craft(tmp_path, OTHER, TOKENS, b"model b's state", into=ID)
    hit, kv, logs = await lookup_after(tmp_path)
    assert hit is None
    assert "another model identity" in of(kv.seen, KVMiss)[0].reason
    assert "kv_disk.rejected" in warned(logs)
    assert not path.exists()


async def test_a_foreign_models_own_folder_is_left_alone(tmp_path: Path) -> None:
    theirs = craft(tmp_path, OTHER, TOKENS, b"model b's state")
    hit, kv, _ = await lookup_after(tmp_path)
    assert hit is None
    assert of(kv.seen, KVMiss)[0].reason == "no saved prefix"
    assert theirs.exists()


async def test_a_damaged_longest_falls_back_to_a_good_shorter_state(tmp_path: Path) -> None:
    craft(tmp_path, ID, [1, 2], b"short and good")
    long = craft(tmp_path, ID, TOKENS, b"long")
    long.write_bytes(long.read_bytes()[:-1])
    hit, kv, logs = await lookup_after(tmp_path)
    assert hit is not None and hit.state.tokens == (1, 2)
    assert hit.state.state == b"short and good"
    assert "kv_disk.rejected" in warned(logs)
    assert len(of(kv.seen, KVDropped)) == 1


FOREIGN_NAMES = [
    f"\u00b2-{'0' * 32}{SUFFIX}",  # a digit str.isdigit() accepts and int() refuses
    f"\u0663-{'0' * 32}{SUFFIX}",  # an Arabic-Indic 3: int() reads it
    f"00000003-{'0' * 31}{SUFFIX}",
    f"-{'0' * 32}{SUFFIX}",
    "notes.txt",
    f".hidden{SUFFIX}",
]


async def test_files_not_named_by_swapos_are_ignored_by_lookups_and_saves(
    tmp_path: Path,
) -> None:
    folder = tmp_path / sf.digest(ID.encode())
    folder.mkdir()
    for name in FOREIGN_NAMES:
        (folder / name).write_bytes(b"not ours" * 100)
    with anyio.fail_after(10):
        async with kvcache(disk_dir=tmp_path, disk_bytes=4000) as kv:
            assert await kv.lookup(ID, PROMPT) is None
            await kv.save(ID, TOKENS)
            await kv.lookup(ID, [9])  # a round trip: the save (and its eviction) is done
        async with kvcache(disk_dir=tmp_path, disk_bytes=4000) as fresh:
            hit = await fresh.lookup(ID, PROMPT)
    assert hit is not None and hit.tier == "disk"
    assert all((folder / name).exists() for name in FOREIGN_NAMES)  # not ours: not deleted


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
async def test_a_fifo_named_as_a_state_file_does_not_hang_the_cache(tmp_path: Path) -> None:
    path = good(tmp_path)
    path.unlink()
    os.mkfifo(path)
    hit, kv, logs = await lookup_after(tmp_path)
    assert hit is None
    assert "kv_disk.rejected" in warned(logs)
    assert kv.actor.statistics().disk_rejected == 1


async def test_a_symlink_to_an_endless_file_is_refused(tmp_path: Path) -> None:
    path = good(tmp_path)
    path.unlink()
    path.symlink_to("/dev/zero")
    hit, _, logs = await lookup_after(tmp_path)
    assert hit is None
    assert "kv_disk.rejected" in warned(logs)


async def test_a_state_file_larger_than_the_disk_budget_is_not_read_whole(
    tmp_path: Path,
) -> None:
    """A planted file far over the tier's budget is refused from its size, not read."""
    path = craft(tmp_path, ID, TOKENS, b"x" * 200_000)
    with capture_logs() as logs, anyio.fail_after(10):
        async with kvcache(disk_dir=tmp_path, disk_bytes=10_000) as kv:
            assert await kv.lookup(ID, PROMPT) is None
    assert "kv_disk.rejected" in warned(logs)
    assert not path.exists()


# -- a full disk -------------------------------------------------------------------------


def _enospc(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("where", ["mkstemp", "fsync", "replace", "mkdir"])
async def test_a_full_disk_is_a_warning_ram_still_serves_and_nothing_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """ENOSPC simulated at each step of a write (a monkeypatched call: no small filesystem
    is mounted for the test); a later write, with room again, lands."""
    targets = {
        "mkstemp": (tempfile, "mkstemp"),
        "fsync": (os, "fsync"),
        "replace": (os, "replace"),
        "mkdir": (Path, "mkdir"),
    }
    module, name = targets[where]
    with capture_logs() as logs, anyio.fail_after(10):
        async with kvcache(disk_dir=tmp_path / "kv") as kv:
            with monkeypatch.context() as patch:
                patch.setattr(module, name, _enospc)
                await kv.save(ID, TOKENS)
                hit = await kv.lookup(ID, PROMPT)
            await kv.save(ID, [5, 6])
            await kv.lookup(ID, [9])
    assert hit is not None and hit.tier == "ram"
    drops = [d for d in of(kv.seen, KVDropped) if d.tier == "disk"]
    assert len(drops) == 1 and "No space left on device" in drops[0].reason
    assert "kv_disk.write_failed" in warned(logs)
    assert [s.tier for s in of(kv.seen, KVSaved)] == ["ram", "ram+disk"]
    assert not kv.actor.statistics().disk_read_only  # a full disk is not a read-only one
    left = [p.name for p in (tmp_path / "kv").rglob("*") if p.is_file()]
    assert len(left) == 1 and not left[0].startswith(".tmp-")


# -- two caches sharing a folder ---------------------------------------------------------


async def test_two_caches_sharing_a_folder_never_restore_a_wrong_state(tmp_path: Path) -> None:
    """Two KVCache actors (two servers) on one folder with a budget of three states: each
    evicts the other's files while the other reads them. Every hit is the state saved for
    exactly its tokens and model; a file gone meanwhile is a miss."""
    size = 100

    def payload(identity: str, tokens: list[int]) -> bytes:
        tag = f"{identity}:{tokens}".encode()
        return (tag * (size // len(tag) + 1))[:size]

    hits = misses = 0
    with anyio.fail_after(30):
        async with (
            kvcache(disk_dir=tmp_path, disk_bytes=3 * (size + 400), budget=1) as a,
            kvcache(disk_dir=tmp_path, disk_bytes=3 * (size + 400), budget=1) as b,
        ):
            for i in range(40):
                for kv, identity in ((a, ID), (b, OTHER), (b, ID)):
                    tokens = [i % 7, i % 5, i % 3]
                    await save(kv, identity, tokens, payload(identity, tokens))
                    j = (i * 3) % 7
                    prompt = [j % 7, j % 5, j % 3, 99]
                    found = await kv.lookup(identity, prompt)
                    if found is None:
                        misses += 1
                        continue
                    hits += 1
                    assert found.state.state == payload(identity, list(found.state.tokens))
                    assert list(found.state.tokens) == prompt[: len(found.state.tokens)]
    assert hits > 0 and misses > 0  # both happened, so both were checked
    assert not list(state_files(tmp_path, ".tmp-*"))
    assert sum(p.stat().st_size for p in state_files(tmp_path)) <= 3 * (size + 400)
    assert of(a.seen, KVHit) or of(b.seen, KVHit)


def test_a_store_rejects_a_file_replaced_under_it_by_another_writer(tmp_path: Path) -> None:
    """A cached token list is not trusted: a file rewritten meanwhile by another process
    (another identity's content under this name) is verified again on read."""
    store = DiskStore(tmp_path, 10_000)
    path = good(tmp_path)
    assert store.longest_common(ID, PROMPT).state is not None
    craft(tmp_path, OTHER, TOKENS, b"replaced", into=ID)
    found = store.longest_common(ID, PROMPT)
    assert found.state is None and "another model identity" in found.rejected[0].reason
    assert not path.exists()
