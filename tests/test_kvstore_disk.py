"""The disk and RAM tiers of the KV cache, synchronously (no event loop, no model)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swapos.data.prefix import PrefixState
from swapos.kvstore import DiskStore, RamStore

ID = "sha256=aaa;size=1;mtime_ns=2;n_ctx=2048;kv=f16/f16;llama_cpp=0.3.36"
OTHER_CTX = ID.replace("n_ctx=2048", "n_ctx=4096")
OTHER_FILE = ID.replace("sha256=aaa", "sha256=bbb")


def state(tokens: list[int], size: int = 100, fill: int = 7) -> PrefixState:
    return PrefixState(tokens=tuple(tokens), state=bytes([fill]) * size)


def files(root: Path) -> list[Path]:
    return sorted(root.glob("*/*.kv"))


def test_state_written_by_one_store_is_read_by_a_fresh_one(tmp_path: Path) -> None:
    DiskStore(tmp_path, 10_000).put(ID, state([1, 2, 3], fill=9))
    found = DiskStore(tmp_path, 10_000).longest_prefix(ID, [1, 2, 3, 4, 5])
    assert found.state == state([1, 2, 3], fill=9)
    assert found.rejected == []


def test_longest_saved_prefix_wins(tmp_path: Path) -> None:
    store = DiskStore(tmp_path, 10_000)
    store.put(ID, state([1, 2], fill=1))
    store.put(ID, state([1, 2, 3, 4], fill=2))
    store.put(ID, state([1, 9, 9], fill=3))
    found = store.longest_prefix(ID, [1, 2, 3, 4, 5])
    assert found.state is not None and found.state.tokens == (1, 2, 3, 4)
    shorter = store.longest_prefix(ID, [1, 2, 3, 4, 5], longer_than=4)
    assert shorter.state is None


def test_only_proper_prefixes_match(tmp_path: Path) -> None:
    store = DiskStore(tmp_path, 10_000)
    store.put(ID, state([1, 2, 3]))
    assert store.longest_prefix(ID, [1, 2, 3]).state is None
    assert store.longest_prefix(ID, [1, 2, 4, 5]).state is None


@pytest.mark.parametrize("other", [OTHER_CTX, OTHER_FILE])
def test_state_is_refused_for_another_identity(tmp_path: Path, other: str) -> None:
    store = DiskStore(tmp_path, 10_000)
    store.put(ID, state([1, 2, 3]))
    assert store.longest_prefix(other, [1, 2, 3, 4]).state is None
    assert store.get(other, [1, 2, 3]) is None


def test_file_moved_under_another_identity_is_rejected_by_its_header(tmp_path: Path) -> None:
    store = DiskStore(tmp_path, 10_000)
    store.put(ID, state([1, 2, 3]))
    store.put(OTHER_CTX, state([5]))  # creates the other identity's directory
    (src,) = [p for p in files(tmp_path) if p.name.startswith("00000003")]
    (other_dir,) = {p.parent for p in files(tmp_path)} - {src.parent}
    os.replace(src, other_dir / src.name)
    found = store.longest_prefix(OTHER_CTX, [1, 2, 3, 4])
    assert found.state is None
    assert "another model identity" in found.rejected[0].reason
    assert not (other_dir / src.name).exists()


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda b: b[:-1] + bytes([b[-1] ^ 0xFF]), "checksum"),
        (lambda b: b[:-40], "payload is"),
        (lambda b: b[:10], "truncated"),
        (lambda b: b"garbage!" + b[8:], "bad magic"),
        (lambda b: b[:12] + b"[" + b[13:], "header"),
    ],
    ids=["bitflip", "truncated-payload", "truncated-header", "magic", "header"],
)
def test_corrupted_file_is_a_miss_with_reason_and_is_deleted(
    tmp_path: Path, damage: object, reason: str
) -> None:
    DiskStore(tmp_path, 10_000).put(ID, state([1, 2, 3]))
    (path,) = files(tmp_path)
    path.write_bytes(damage(path.read_bytes()))  # type: ignore[operator]
    found = DiskStore(tmp_path, 10_000).longest_prefix(ID, [1, 2, 3, 4])
    assert found.state is None
    assert len(found.rejected) == 1
    assert reason in found.rejected[0].reason
    assert not path.exists()


def test_corrupted_longest_falls_back_to_next_longest(tmp_path: Path) -> None:
    store = DiskStore(tmp_path, 10_000)
    store.put(ID, state([1, 2], fill=1))
    store.put(ID, state([1, 2, 3], fill=2))
    longest = next(p for p in files(tmp_path) if p.name.startswith("00000003"))
    longest.write_bytes(longest.read_bytes()[:-5])
    found = store.longest_prefix(ID, [1, 2, 3, 4])
    assert found.state == state([1, 2], fill=1)
    assert len(found.rejected) == 1


def test_write_is_atomic_no_temporary_file_remains(tmp_path: Path) -> None:
    store = DiskStore(tmp_path, 10_000)
    store.put(ID, state([1, 2, 3]))
    store.put(ID, state([1, 2, 3], fill=8))  # overwrite in place
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and p.name.startswith(".")]
    assert leftovers == []
    assert len(files(tmp_path)) == 1
    assert store.get(ID, [1, 2, 3]) == state([1, 2, 3], fill=8)


def test_state_larger_than_disk_budget_is_not_written(tmp_path: Path) -> None:
    put = DiskStore(tmp_path, 500).put(ID, state([1], size=1000))
    assert not put.stored
    assert "larger than the disk budget" in put.dropped[0].reason
    assert files(tmp_path) == []


def test_disk_evicts_least_recently_used_and_a_read_refreshes(tmp_path: Path) -> None:
    one = DiskStore(tmp_path, 10_000).put(ID, state([1], size=1000)).nbytes
    store = DiskStore(tmp_path, 3 * one + one // 2)
    store.put(ID, state([2], size=1000))
    store.put(ID, state([3], size=1000))
    for i, path in enumerate(sorted(files(tmp_path), key=lambda p: p.name)):
        os.utime(path, ns=(10**18 + i * 10**9, 10**18 + i * 10**9))  # [1] < [2] < [3]
    assert store.longest_prefix(ID, [1, 0]).state is not None  # [1] becomes most recent
    put = store.put(ID, state([4], size=1000))
    assert [d.tokens for d in put.dropped] == [1]
    assert store.get(ID, [2]) is None
    assert store.get(ID, [1]) is not None
    assert store.total_bytes() <= store.budget_bytes


@settings(max_examples=30, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=3000), min_size=1, max_size=25),
    budget=st.integers(min_value=100, max_value=8000),
)
def test_disk_tier_never_exceeds_its_budget(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], budget: int
) -> None:
    root = tmp_path_factory.mktemp("kv")
    store = DiskStore(root, budget, fsync=False)
    for i, size in enumerate(sizes):
        store.put(ID, state([i, i + 1], size=size))
        assert store.total_bytes() <= budget


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=3000), min_size=1, max_size=40),
    budget=st.integers(min_value=0, max_value=8000),
)
def test_ram_tier_never_exceeds_its_budget(sizes: list[int], budget: int) -> None:
    ram = RamStore(budget)
    for i, size in enumerate(sizes):
        kept, _ = ram.put(ID, state([i], size=size))
        assert kept == (size <= budget)
        assert ram.nbytes <= budget
        assert ram.nbytes == sum(len(s.state) for s in ram._entries.values())


def test_ram_longest_prefix_and_identity(tmp_path: Path) -> None:
    ram = RamStore(10_000)
    ram.put(ID, state([1, 2]))
    ram.put(ID, state([1, 2, 3]))
    ram.put(OTHER_CTX, state([1, 2, 3, 4]))
    found = ram.longest_prefix(ID, [1, 2, 3, 4, 5])
    assert found is not None and found.tokens == (1, 2, 3)
    assert ram.longest_prefix(OTHER_FILE, [1, 2, 3, 4, 5]) is None
