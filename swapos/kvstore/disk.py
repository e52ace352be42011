"""The disk tier: prefix states as verified files under a size budget (blocking; call it from
a worker thread).

Layout: ``<root>/<identity hash>/<n tokens>-<token hash>.kv``. The names let a lookup find
candidates from a directory listing alone (no file is opened until one matches), and they
work across processes: a fresh store (a new run) sees what an earlier one wrote. A file is::

    MAGIC (8 bytes) | header length (u32 LE) | header (JSON) | tokens (int32 LE) | payload

The header holds the full identity, the token count and hash, the payload length and its
blake2b digest. A read verifies all of them against what the caller asked for; a file that
fails is deleted and reported as a miss with the reason, never raised. Files are written to a
temporary name and renamed into place (atomic). After each write the oldest files (by
mtime; a read touches its file) are deleted until the directory fits the budget.
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import platformdirs
import structlog

from swapos.data.prefix import PrefixState
from swapos.kvstore.ram import Dropped, usable
from swapos.policies.tokens import common_prefix_len

log = structlog.get_logger(__name__)

MAGIC = b"SWAPKV01"
FORMAT_VERSION = 1
SUFFIX = ".kv"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_S = 3600.0
_MAX_HEADER = 1 << 20
_LEN = struct.Struct("<I")


def default_kv_dir() -> Path:
    """``<user cache>/swapos/kv`` (``platformdirs.user_cache_dir("swapos")``)."""
    return Path(platformdirs.user_cache_dir("swapos")) / "kv"


class _Header(msgspec.Struct, frozen=True, kw_only=True):
    version: int
    identity: str
    n_tokens: int
    tokens_hash: str
    payload_len: int
    payload_hash: str


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


class _Corrupt(Exception):
    """A file failed verification (the message says how)."""


def _hash(data: bytes | memoryview, size: int = 16) -> str:
    return hashlib.blake2b(data, digest_size=size).hexdigest()


def _token_bytes(tokens: list[int] | tuple[int, ...]) -> bytes:
    arr = array.array("i", tokens)
    if sys.byteorder == "big":
        arr.byteswap()
    return arr.tobytes()


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
        return self.root / _hash(identity.encode())

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
            parsed = _parse_name(name)
            if parsed is not None and longer_than < parsed[0] < len(tokens):
                candidates.append((*parsed, name))
        if not candidates:
            return DiskLookup()
        packed = _token_bytes(tokens)
        rejected: list[Dropped] = []
        for n, token_hash, name in sorted(candidates, reverse=True):
            if _hash(packed[: 4 * n]) != token_hash:
                continue
            path = self._dir(identity) / name
            try:
                state, size = self._read(path, identity, packed[: 4 * n])
            except FileNotFoundError:
                continue  # evicted meanwhile (perhaps by another process)
            except (_Corrupt, OSError) as exc:
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
        packed = _token_bytes(tokens)
        for name in names:
            parsed = _parse_name(name)
            if parsed is None:
                continue
            saved = self._saved_tokens(directory / name)
            if saved is None:  # unreadable: a candidate if its name says it matches whole
                n, token_hash = parsed
                if n > len(tokens) or _hash(packed[: 4 * n]) != token_hash:
                    continue
                saved = tuple(tokens[:n])  # so that _read rejects (deletes) it below
            common = common_prefix_len(saved, tokens)
            if common > longer_than and usable(common, len(saved), min_partial, window):
                ranked.append((-common, len(saved), name, saved))
        rejected: list[Dropped] = []
        for neg_common, n, name, saved in sorted(ranked):
            path = directory / name
            try:
                state, size = self._read(path, identity, _token_bytes(saved))
            except FileNotFoundError:
                self._tokens.pop(str(path), None)
                continue
            except (_Corrupt, OSError) as exc:
                self._tokens.pop(str(path), None)
                rejected.append(self._reject(path, n, exc))
                continue
            with contextlib.suppress(OSError):
                os.utime(path)  # the LRU clock
            return DiskLookup(state=state, nbytes=size, rejected=rejected, common=-neg_common)
        return DiskLookup(rejected=rejected)

    def _saved_tokens(self, path: Path) -> tuple[int, ...] | None:
        """The token prefix stored in ``path`` (unverified: the payload is checked on read),
        or None if the file is unreadable (it is then left to :meth:`_read` to reject)."""
        key = str(path)
        if key in self._tokens:
            return self._tokens[key]
        try:
            with open(path, "rb") as f:
                head = f.read(12)
                if len(head) < 12 or head[:8] != MAGIC:
                    return None
                (hlen,) = _LEN.unpack_from(head, 8)
                if hlen > _MAX_HEADER:
                    return None
                meta = msgspec.json.decode(f.read(hlen), type=_Header)
                raw = f.read(4 * meta.n_tokens)
        except (OSError, msgspec.DecodeError):
            return None
        if len(raw) != 4 * meta.n_tokens:
            return None
        arr = array.array("i", raw)
        if sys.byteorder == "big":
            arr.byteswap()
        self._tokens[key] = tuple(arr)
        return self._tokens[key]

    def get(self, identity: str, tokens: list[int] | tuple[int, ...]) -> PrefixState | None:
        """The state saved for exactly ``(identity, tokens)``, verified; None if absent or bad
        (a bad file is deleted)."""
        packed = _token_bytes(tokens)
        path = self._dir(identity) / _name(len(tokens), packed)
        try:
            return self._read(path, identity, packed)[0]
        except FileNotFoundError:
            return None
        except (_Corrupt, OSError) as exc:
            self._reject(path, len(tokens), exc)
            return None

    def _read(self, path: Path, identity: str, packed: bytes) -> tuple[PrefixState, int]:
        data = memoryview(path.read_bytes())
        if len(data) < 12:
            raise _Corrupt(f"truncated ({len(data)} bytes)")
        if bytes(data[:8]) != MAGIC:
            raise _Corrupt("not a SwapOS KV file (bad magic)")
        (hlen,) = _LEN.unpack_from(data, 8)
        if hlen > _MAX_HEADER or 12 + hlen > len(data):
            raise _Corrupt("truncated header")
        try:
            head = msgspec.json.decode(data[12 : 12 + hlen], type=_Header)
        except msgspec.DecodeError as exc:
            raise _Corrupt(f"unreadable header ({exc})") from None
        if head.version != FORMAT_VERSION:
            raise _Corrupt(f"format version {head.version}, expected {FORMAT_VERSION}")
        if head.identity != identity:
            raise _Corrupt("belongs to another model identity")
        n = len(packed) // 4
        start = 12 + hlen
        if (
            head.n_tokens != n
            or head.tokens_hash != _hash(packed)
            or data[start : start + 4 * n] != packed
        ):
            raise _Corrupt("token prefix does not match")
        payload = data[start + 4 * n :]
        if len(payload) != head.payload_len:
            raise _Corrupt(f"payload is {len(payload)} bytes, header says {head.payload_len}")
        if _hash(payload, 32) != head.payload_hash:
            raise _Corrupt("payload checksum mismatch")
        tokens = array.array("i", packed)
        if sys.byteorder == "big":
            tokens.byteswap()
        return PrefixState(tokens=tuple(tokens), state=bytes(payload)), len(data)

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
        packed = _token_bytes(state.tokens)
        head = msgspec.json.encode(
            _Header(
                version=FORMAT_VERSION,
                identity=identity,
                n_tokens=len(state.tokens),
                tokens_hash=_hash(packed),
                payload_len=len(state.state),
                payload_hash=_hash(state.state, 32),
            )
        )
        size = len(MAGIC) + _LEN.size + len(head) + len(packed) + len(state.state)
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
                f.write(MAGIC + _LEN.pack(len(head)) + head)
                f.write(packed)
                f.write(state.state)
                if self._fsync:
                    f.flush()
                    os.fsync(f.fileno())
            target = directory / _name(len(state.tokens), packed)
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
                        parsed = _parse_name(entry.name)
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
                if _parse_name(path.name) is not None:
                    with contextlib.suppress(OSError):
                        total += path.stat().st_size
        return total


def _name(n: int, packed: bytes) -> str:
    return f"{n:08d}-{_hash(packed)}{SUFFIX}"


def _parse_name(name: str) -> tuple[int, str] | None:
    """``(n_tokens, token hash)`` of a state file's name, or None for anything else."""
    if not name.endswith(SUFFIX) or name.startswith("."):
        return None
    n, _, token_hash = name[: -len(SUFFIX)].partition("-")
    if not n.isdigit() or len(token_hash) != 32:
        return None
    return int(n), token_hash
