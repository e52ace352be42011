"""The grader's sandbox launcher: isolate this process, then ``exec`` the test command.

Run as a *script* (``python -I _sandbox.py CONFIG_JSON``), never imported by the grader: it is
stdlib-only so it works under ``-I`` without SwapOS on ``sys.path``. Doing the isolation in a
fresh single-threaded process (instead of ``preexec_fn``) keeps the grader safe to call from
worker threads: ``preexec_fn`` may deadlock in a threaded parent.

Steps, each best-effort and recorded as a note (written as JSON ``{"notes": [...], "pidns":
"pid:[inode]" | null, "pid": N}`` to ``notes_fd`` just before ``exec``, so the sandboxed code
cannot forge it; the grader uses ``pidns`` to wait until every process of the namespace is gone,
and ``pid`` (the test run's pid as the grader sees it) to authenticate the verdict):

1. new namespaces: network (no interfaces but a down loopback; abstract UNIX sockets are per
   network namespace, so the host's are out of reach), mount, pid; when not root, a user
   namespace first (mapping our own uid) so the others are allowed;
2. fork: the child is pid 1 of the new pid namespace, so killing it (the grader kills the whole
   process group) takes every process of the sandbox with it, even ones that called ``setsid``;
3. mounts: private propagation, a fresh ``/proc``; when root, directories the sandbox uid cannot
   traverse (``/root``) hidden under an empty tmpfs, with only the Python installation bound
   back in; an empty tmpfs over ``/tmp``, ``/var/tmp``, ``/run``, ``/dev/shm`` (host sockets,
   shared scratch space); the work directory replaced by a private tmpfs limited in bytes and
   inodes (its files copied in: the disk quota, and the host's directory is never written);
   every mount read-only + nosuid except that tmpfs;
4. rlimits (CPU, address space, file size, open files, processes), ``no_new_privs``;
5. when root: drop to a dedicated unprivileged uid/gid that owns only the work directory (so
   ``RLIMIT_NPROC`` applies: the kernel never enforces it for uid 0);
6. seccomp: ``socket(AF_UNIX, ...)`` fails, so no pathname UNIX socket of the host can be
   connected to, wherever it lives (read-only mounts do not stop ``connect``).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import stat
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
SYS_MOUNT_SETATTR = 442  # x86_64 and aarch64 share the number (generic syscall table)
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SHARED_DIRS = ("/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm", "/dev/mqueue")

_libc = ctypes.CDLL(None, use_errno=True)


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _enc(s: str | None) -> bytes | None:
    return s.encode() if s is not None else None


def _mount(
    src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    rc: int = _libc.mount(_enc(src), _enc(target), _enc(fstype), ctypes.c_ulong(flags), _enc(data))
    _check(rc, f"mount {target}")


def _setattr(path: str, *, set_: int = 0, clr: int = 0, recursive: bool) -> None:
    attr = _MountAttr(set_, clr, 0, 0)
    flags = AT_RECURSIVE if recursive else 0
    rc = _libc.syscall(
        ctypes.c_long(SYS_MOUNT_SETATTR),
        ctypes.c_int(AT_FDCWD),
        path.encode(),
        ctypes.c_uint(flags),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(rc, f"mount_setattr {path}")


def _unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _enter_namespaces(is_root: bool, notes: list[str]) -> bool:
    """Unshare user (when not root), mount, net and pid namespaces; True if mounts are ours."""
    uid, gid = os.getuid(), os.getgid()
    if not is_root:
        try:
            _unshare(CLONE_NEWUSER)
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
            notes.append("userns: yes")
        except OSError as e:
            notes.append(f"userns: unavailable ({e.strerror})")
            notes.append("netns: unavailable (needs root or a user namespace)")
            notes.append("mountns: unavailable (needs root or a user namespace)")
            notes.append("pidns: unavailable (needs root or a user namespace)")
            return False
    mounts_ours = False
    for flag, name in ((CLONE_NEWNET, "netns"), (CLONE_NEWNS, "mountns"), (CLONE_NEWPID, "pidns")):
        try:
            _unshare(flag)
            notes.append(f"{name}: yes")
            mounts_ours = mounts_ours or flag == CLONE_NEWNS
        except OSError as e:
            notes.append(f"{name}: unavailable ({e.strerror})")
    return mounts_ours


def _untraversable_root(path: str, uid: int, gid: int) -> str | None:
    """The outermost ancestor of ``path`` that ``uid`` cannot traverse, if any."""
    parts = os.path.realpath(path).split(os.sep)[1:]
    cur = ""
    for part in parts:
        cur = f"{cur}/{part}"
        try:
            st = os.stat(cur)
        except OSError:
            return cur
        if st.st_uid == uid:
            bits = stat.S_IXUSR
        else:
            bits = stat.S_IXGRP if st.st_gid == gid else stat.S_IXOTH
        if not st.st_mode & bits:
            return cur
    return None


def _hide_private_dirs(keep: list[str], uid: int, notes: list[str]) -> None:
    """Cover directories ``uid`` cannot traverse with a tmpfs; bind ``keep`` paths back in."""
    groups: dict[str, list[str]] = {}
    for path in keep:
        if os.path.isdir(path):
            top = _untraversable_root(path, uid, uid)
            if top is not None:
                groups.setdefault(top, []).append(os.path.realpath(path))
    for top, paths in sorted(groups.items()):
        outer = [p for p in sorted(set(paths)) if not any(p.startswith(q + "/") for q in paths)]
        fds = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in outer}
        _mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
        for p, fd in fds.items():
            os.makedirs(p, mode=0o755, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", p, None, MS_BIND | MS_REC)
            os.close(fd)
        notes.append(f"hidden: {top} (bound back: {', '.join(fds)})")


def _lock_filesystem(cfg: dict[str, Any], is_root: bool, notes: list[str]) -> None:
    """Fresh /proc; empty /tmp, /run...; private dirs hidden; the work directory on a quota
    tmpfs; every mount read-only except that one."""
    workdir = cfg["workdir"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV)
        notes.append("proc: private")
    except OSError as e:
        notes.append(f"proc: host view ({e.strerror})")
    if is_root and cfg.get("uid") is not None:
        try:
            _hide_private_dirs(cfg["keep_readable"], cfg["uid"], notes)
        except OSError as e:
            notes.append(f"hidden: failed ({e})")
    files = _snapshot(workdir)
    _cover_shared_dirs(cfg["keep_readable"], notes)
    os.makedirs(workdir, mode=0o755, exist_ok=True)
    _quota_workdir(cfg, files, notes)
    # Not nodev: /dev/null and friends must stay usable; the sandbox cannot create nodes.
    _setattr("/", set_=MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, recursive=True)
    _setattr(workdir, clr=MOUNT_ATTR_RDONLY, recursive=False)
    notes.append("fs: read-only outside the work directory")


def _snapshot(workdir: str) -> dict[str, bytes | None]:
    """The work directory's entries (flat, as the grader writes it): file bytes, None for dirs."""
    files: dict[str, bytes | None] = {}
    with os.scandir(workdir) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                files[entry.name] = None
            elif entry.is_file(follow_symlinks=False):
                files[entry.name] = _read_regular(entry.path)
    return files


def _read_regular(path: str) -> bytes:
    """A regular file's bytes; never follows a link or blocks on a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read()
    finally:
        os.close(fd)


def _cover_shared_dirs(keep: list[str], notes: list[str]) -> None:
    """An empty tmpfs over every directory that holds host sockets or shared scratch space
    (unless the Python installation lives there)."""
    covered = []
    for path in SHARED_DIRS:
        needed = any(os.path.realpath(k).startswith(path + "/") for k in keep)
        if os.path.isdir(path) and not os.path.islink(path) and not needed:
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
            covered.append(path)
    notes.append(f"empty: {' '.join(covered)}")


def _quota_workdir(cfg: dict[str, Any], files: dict[str, bytes | None], notes: list[str]) -> None:
    """Mount a size- and inode-limited tmpfs on the work directory and copy its files in."""
    workdir, uid = cfg["workdir"], cfg.get("uid")
    quota = cfg["quota"]
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    data = f"size={quota['bytes']},nr_inodes={quota['inodes']},mode=0700{owner}"
    _mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV, data)
    for name, content in files.items():
        path = os.path.join(workdir, name)
        if content is None:
            os.mkdir(path, 0o700)
        else:
            with open(path, "wb") as f:
                f.write(content)
        if uid is not None:
            os.chown(path, uid, uid)
    notes.append(f"disk quota: {quota['bytes']} bytes, {quota['inodes']} inodes (private tmpfs)")


def _set_limits(limits: dict[str, int], notes: list[str]) -> None:
    applied = []
    for name, wanted in limits.items():
        res = getattr(resource, f"RLIMIT_{name.upper()}")
        _, hard = resource.getrlimit(res)
        value = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(res, (value, value))
            applied.append(f"{name}={value}")
        except (OSError, ValueError) as e:
            notes.append(f"rlimit {name}: failed ({e})")
    notes.append("rlimits: " + " ".join(applied))


def _drop_privileges(cfg: dict[str, Any], notes: list[str]) -> None:
    uid: int | None = cfg.get("uid")
    keep: list[str] = cfg["keep_readable"] if uid is not None else []
    blocked = [p for p in keep if uid is not None and _untraversable_root(p, uid, uid)]
    if uid is not None and not blocked:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            notes.append(f"uid: {uid} (unprivileged, owns only the work directory)")
        except OSError as e:
            notes.append(f"uid: {os.getuid()} kept (cannot switch: {e.strerror})")
    elif blocked:
        notes.append(f"uid: {os.getuid()} kept ({blocked[0]} unreadable for a sandbox uid)")
    else:
        notes.append(f"uid: {os.getuid()} (unchanged)")
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
        notes.append("no_new_privs: yes")


def _child(cfg: dict[str, Any], is_root: bool, mounts_ours: bool, notes: list[str]) -> None:
    host_pid = _host_pid()
    if mounts_ours:
        try:
            _lock_filesystem(cfg, is_root, notes)
        except OSError as e:
            notes.append(f"fs: not locked ({e})")
    if not any(n.startswith("disk quota:") for n in notes):
        notes.append("disk quota: unavailable (no private mounts); RLIMIT_FSIZE per file only")
    _set_limits(cfg["limits"], notes)
    _drop_privileges(cfg, notes)
    _forbid_unix_sockets(notes)
    fd = cfg["notes_fd"]
    pidns = os.readlink("/proc/self/ns/pid") if "pidns: yes" in notes else None
    os.write(fd, json.dumps({"notes": notes, "pidns": pidns, "pid": host_pid}).encode())
    os.close(fd)
    os.chdir(cfg["workdir"])
    os.execve(cfg["argv"][0], cfg["argv"], cfg["env"])


def _host_pid() -> int:
    """Our pid as the grader sees it (``NSpid``'s first field, read before /proc is replaced)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return int(line.split()[1])
    return os.getpid()


_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NR_SOCKET = {"x86_64": 41, "aarch64": 198}
AF_UNIX = 1
EACCES = 13


class _SockFilter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter)))


def _forbid_unix_sockets(notes: list[str]) -> None:
    """seccomp: ``socket(AF_UNIX, ...)`` fails with EACCES, so no host socket can be reached
    by path, wherever it lives (a read-only mount does not stop ``connect``). ``socketpair``
    stays allowed. Syscalls of another ABI (32-bit, x32) fail with EACCES."""
    machine = os.uname().machine
    if machine not in _AUDIT_ARCH:
        notes.append(f"seccomp: unavailable (unknown architecture {machine})")
        return
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | EACCES
    prog = [
        (ld, 0, 0, 4),  # arch
        (jeq, 1, 0, _AUDIT_ARCH[machine]),
        (ret, 0, 0, deny),
        (ld, 0, 0, 0),  # syscall number
        (jge, 0, 1, 0x40000000),  # x32 ABI
        (ret, 0, 0, deny),
        (jeq, 0, 3, _NR_SOCKET[machine]),
        (ld, 0, 0, 16),  # args[0], low 32 bits
        (jeq, 0, 1, AF_UNIX),
        (ret, 0, 0, deny),
        (ret, 0, 0, allow),
    ]
    filters = (_SockFilter * len(prog))(*(_SockFilter(*ins) for ins in prog))
    fprog = _SockFprog(len(prog), filters)
    rc = _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0)
    if rc == 0:
        notes.append("seccomp: socket(AF_UNIX) denied")
    else:
        notes.append(f"seccomp: unavailable ({os.strerror(ctypes.get_errno())})")


def main() -> None:
    """Isolate, then exec ``argv`` from the JSON config in ``sys.argv[1]``."""
    cfg: dict[str, Any] = json.loads(sys.argv[1])
    is_root = os.geteuid() == 0
    notes: list[str] = []
    mounts_ours = _enter_namespaces(is_root, notes)
    if not any(n == "pidns: yes" for n in notes):
        _child(cfg, is_root, mounts_ours, notes)
    pid = os.fork()
    if pid == 0:
        try:
            _child(cfg, is_root, mounts_ours, notes)
        finally:
            os._exit(127)
    os.close(cfg["notes_fd"])
    _, status = os.waitpid(pid, 0)
    sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


if __name__ == "__main__":
    main()
