"""The disk tier: prefix states as verified files under a size budget (blocking; call it from
a worker thread).

Layout: ``<root>/<identity hash>/<n tokens>-<token hash>.kv``. The names let a lookup find
candidates from a directory listing alone (no file is opened until one matches), and they
work across processes: a fresh store (a new run) sees what an earlier one wrote. A file's
layout and its verification are :mod:`swapos.kvstore.state_file`'s; a file that fails is
deleted and reported as a miss with the reason, never raised. A name that is not a state
file's (another program's file in the folder) is never read, counted or deleted. Files are
written to a temporary name and renamed into place (atomic). After each write the oldest
files (by mtime; a read touches its file) are deleted until the directory fits the budget.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path

import msgspec
import platformdirs
import structlog

from swapos.data.prefix import PrefixState
from swapos.kvstore.ram import Dropped, usable
from swapos.kvstore.state_file import (
    SUFFIX,
    Corrupt,
    digest,
    encode,
    file_name,
    parse_name,
    read_state,
    read_tokens,
    token_bytes,
)
from swapos.policies.tokens import common_prefix_len

log = structlog.get_logger(__name__)

_TMP_PREFIX = ".tmp-"
_STALE_TMP_S = 3600.0


def default_kv_dir() -> Path:
    """``<user cache>/swapos/kv`` (``platformdirs.user_cache_dir("swapos")``)."""
    return Path(platformdirs.user_cache_dir("swapos")) / "kv"


class DiskLookup(msgspec.Struct, frozen=True, kw_only=True):
    """What a disk lookup found, and the files it rejected (deleted) on the way."""

    state: PrefixState | None = None
    nbytes: int = 0
    rejected: list[Dropped] = []
    common: int = 0
    """Tokens ``state`` shares with the prompt looked up (``longest_common`` only)."""


class DiskPut(msgspec.Struct, frozen=True, kw_only=True):
    """What a disk write did: whether the state was stored, its file size, what was evicted."""

    stored: bool
    nbytes: int
    dropped: list[Dropped] = []


class DiskStore:
    """Prefix states on disk under ``root``, never more than ``budget_bytes`` of files.

    Every method blocks: the KVCache actor runs them with ``anyio.to_thread.run_sync``.
    Nothing touches the disk before the first call. Filesystem errors on reads become
    rejections; :meth:`put` raises ``OSError`` only for a failed write (the caller reports it).
    """

    def __init__(self, root: Path, budget_bytes: int, *, fsync: bool = True) -> None:
        self.root = Path(root)
        self.budget_bytes = budget_bytes
        self._fsync = fsync
        self._tokens: dict[str, tuple[int, ...]] = {}  # file path -> its token prefix

    def _dir(self, identity: str) -> Path:
        return self.root / digest(identity.encode())

    # -- reads ---------------------------------------------------------------------------

    def longest_prefix(
        self, identity: str, tokens: list[int], *, longer_than: int = 0
    ) -> DiskLookup:
        """The verified state for ``identity`` with the longest proper prefix of ``tokens``.

        Only prefixes longer than ``longer_than`` tokens are considered. A file that fails
        verification is deleted, listed in ``rejected``, and the next candidate tried.
        """
        try:
            names = os.listdir(self._dir(identity))
        except OSError:
            return DiskLookup()
        candidates: list[tuple[int, str, str]] = []
        for name in names:
            parsed = parse_name(name)
            if parsed is not None and longer_than < parsed[0] < len(tokens):
                candidates.append((*parsed, name))
        if not candidates:
            return DiskLookup()
        packed = token_bytes(tokens)
        rejected: list[Dropped] = []
        for n, token_hash, name in sorted(candidates, reverse=True):
            if digest(packed[: 4 * n]) != token_hash:
                continue
            path = self._dir(identity) / name
            try:
                state, size = self._read(path, identity, packed[: 4 * n])
            except FileNotFoundError:
                continue  # evicted meanwhile (perhaps by another process)
            except (Corrupt, OSError) as exc:
                rejected.append(self._reject(path, n, exc))
                continue
            with contextlib.suppress(OSError):
                os.utime(path)  # the LRU clock
            return DiskLookup(state=state, nbytes=size, rejected=rejected)
        return DiskLookup(rejected=rejected)

    def longest_common(
        self,
        identity: str,
        tokens: list[int],
        *,
        longer_than: int = 0,
        min_partial: int = 1,
        window: int | None = None,
    ) -> DiskLookup:
        """The verified state for ``identity`` sharing the longest common prefix with
        ``tokens`` (more than ``longer_than`` tokens; a partial match needs ``min_partial``
        and, with a sliding ``window``, a state that fits in it).

        Candidates are ranked from the token arrays alone (read once per file and cached:
        a file's name hashes its tokens, so its tokens never change); only the chosen file's
        payload is read and verified. A file that fails is deleted, listed in ``rejected``,
        and the next candidate tried.
        """
        directory = self._dir(identity)
        try:
            names = os.listdir(directory)
        except OSError:
            return DiskLookup()
        ranked: list[tuple[int, int, str, tuple[int, ...]]] = []  # (-common, n, name, tokens)
        packed = token_bytes(tokens)
        for name in names:
            parsed = parse_name(name)
            if parsed is None:
                continue
            saved = self._saved_tokens(directory / name)
            if saved is None:  # unreadable: a candidate if its name says it matches whole
                n, token_hash = parsed
                if n > len(tokens) or digest(packed[: 4 * n]) != token_hash:
                    continue
                saved = tuple(tokens[:n])  # so that _read rejects (deletes) it below
            common = common_prefix_len(saved, tokens)
            if common > longer_than and usable(common, len(saved), min_partial, window):
                ranked.append((-common, len(saved), name, saved))
        rejected: list[Dropped] = []
        for neg_common, n, name, saved in sorted(ranked):
            path = directory / name
            try:
                state, size = self._read(path, identity, token_bytes(saved))
            except FileNotFoundError:
                self._tokens.pop(str(path), None)
                continue
            except (Corrupt, OSError) as exc:
                self._tokens.pop(str(path), None)
                rejected.append(self._reject(path, n, exc))
                continue
            with contextlib.suppress(OSError):
                os.utime(path)  # the LRU clock
            return DiskLookup(state=state, nbytes=size, rejected=rejected, common=-neg_common)
        return DiskLookup(rejected=rejected)

    def _saved_tokens(self, path: Path) -> tuple[int, ...] | None:
        """The token prefix stored in ``path`` (cached: a file's name hashes its tokens), or
        None if unreadable or not the tokens its name hashes (left to :meth:`_read` to
        reject)."""
        key = str(path)
        if key not in self._tokens:
            saved = read_tokens(path, self.budget_bytes)
            if saved is None:
                return None
            self._tokens[key] = saved
        return self._tokens[key]

    def get(self, identity: str, tokens: list[int] | tuple[int, ...]) -> PrefixState | None:
        """The state saved for exactly ``(identity, tokens)``, verified; None if absent or bad
        (a bad file is deleted)."""
        packed = token_bytes(tokens)
        path = self._dir(identity) / file_name(len(tokens), packed)
        try:
            return self._read(path, identity, packed)[0]
        except FileNotFoundError:
            return None
        except (Corrupt, OSError) as exc:
            self._reject(path, len(tokens), exc)
            return None

    def _read(self, path: Path, identity: str, packed: bytes) -> tuple[PrefixState, int]:
        return read_state(path, identity, packed, self.budget_bytes)

    def _reject(self, path: Path, n: int, exc: BaseException) -> Dropped:
        size = 0
        with contextlib.suppress(OSError):
            size = path.stat().st_size
            path.unlink()
        log.warning("kv_disk.rejected", path=str(path), reason=str(exc))
        return Dropped(tokens=n, nbytes=size, reason=f"corrupt KV file {path.name}: {exc}; deleted")

    # -- writes --------------------------------------------------------------------------

    def put(self, identity: str, state: PrefixState) -> DiskPut:
        """Write ``state`` atomically, then evict the oldest files down to the budget.

        Raises:
            OSError: the file could not be written (disk full, read-only, ...).
        """
        parts = encode(identity, state)
        size = sum(map(len, parts))
        if size > self.budget_bytes:
            reason = "larger than the disk budget"
            return DiskPut(
                stored=False,
                nbytes=size,
                dropped=[Dropped(tokens=len(state.tokens), nbytes=size, reason=reason)],
            )
        directory = self._dir(identity)
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=SUFFIX, dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                for part in parts:
                    f.write(part)
                if self._fsync:
                    f.flush()
                    os.fsync(f.fileno())
            target = directory / file_name(len(state.tokens), parts[1])
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return DiskPut(stored=True, nbytes=size, dropped=self.evict_to_budget(keep=target))

    def evict_to_budget(self, *, keep: Path | None = None) -> list[Dropped]:
        """Delete the least recently used files until the total fits the budget.

        ``keep`` (the file just written) goes last. Stale temporary files (a crash mid-write)
        are removed too.
        """
        files: list[tuple[int, int, Path, int]] = []  # (mtime_ns, size, path, n_tokens)
        now = time.time()
        try:
            dirs = list(os.scandir(self.root))
        except OSError:
            return []
        for d in dirs:
            if not d.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError), os.scandir(d.path) as it:
                for entry in it:
                    with contextlib.suppress(OSError):
                        st = entry.stat(follow_symlinks=False)
                        if entry.name.startswith(_TMP_PREFIX):
                            if now - st.st_mtime > _STALE_TMP_S:
                                os.unlink(entry.path)
                            continue
                        parsed = parse_name(entry.name)
                        if parsed is not None:
                            mtime = 2**63 if keep and entry.path == str(keep) else st.st_mtime_ns
                            files.append((mtime, st.st_size, Path(entry.path), parsed[0]))
        total = sum(f[1] for f in files)
        dropped: list[Dropped] = []
        for _, size, path, n in sorted(files, key=lambda f: f[0]):
            if total <= self.budget_bytes:
                break
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            self._tokens.pop(str(path), None)
            total -= size
            dropped.append(
                Dropped(tokens=n, nbytes=size, reason="least recently used, over the disk budget")
            )
        return dropped

    def total_bytes(self) -> int:
        """Bytes of state files under ``root`` now."""
        total = 0
        with contextlib.suppress(OSError):
            for path in self.root.glob(f"*/*{SUFFIX}"):
                if parse_name(path.name) is not None:
                    with contextlib.suppress(OSError):
                        total += path.stat().st_size
        return total
