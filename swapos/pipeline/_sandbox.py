"""The grader's sandbox launcher: isolate this process, then ``exec`` the test command.

Run as a *script* (``python -I _sandbox.py CONFIG_JSON``), never imported by the grader: it is
stdlib-only so it works under ``-I`` without SwapOS on ``sys.path``. Doing the isolation in a
fresh single-threaded process (instead of ``preexec_fn``) keeps the grader safe to call from
worker threads: ``preexec_fn`` may deadlock in a threaded parent.

Steps, each best-effort and recorded as a note (written as JSON ``{"notes": [...], "pidns":
"pid:[inode]" | null}`` to ``notes_fd`` just before ``exec``, so the sandboxed code cannot forge
it; the grader uses ``pidns`` to wait until every process of the namespace is gone):

1. new namespaces: network (no interfaces but a down loopback), mount, pid; when not root, a
   user namespace first (mapping our own uid) so the others are allowed;
2. fork: the child is pid 1 of the new pid namespace, so killing it (the grader kills the whole
   process group) takes every process of the sandbox with it, even ones that called ``setsid``;
3. mounts: private propagation, a fresh ``/proc``, every mount read-only + nosuid except
   the work directory; when root, directories the sandbox uid cannot traverse (``/root``) are
   hidden under an empty tmpfs, with only the Python installation bound back in;
4. rlimits (CPU, address space, file size, open files, processes), ``no_new_privs``;
5. when root: drop to a dedicated unprivileged uid/gid that owns only the work directory (so
   ``RLIMIT_NPROC`` applies: the kernel never enforces it for uid 0).
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
    """Make every mount read-only except the work directory; fresh /proc; hide private dirs."""
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
    _mount(workdir, workdir, None, MS_BIND | MS_REC)
    # Not nodev: /dev/null and friends must stay usable; the sandbox cannot create nodes.
    _setattr("/", set_=MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, recursive=True)
    _setattr(workdir, clr=MOUNT_ATTR_RDONLY, recursive=False)
    notes.append("fs: read-only outside the work directory")


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
    if mounts_ours:
        try:
            _lock_filesystem(cfg, is_root, notes)
        except OSError as e:
            notes.append(f"fs: not locked ({e})")
    _set_limits(cfg["limits"], notes)
    _drop_privileges(cfg, notes)
    fd = cfg["notes_fd"]
    pidns = os.readlink("/proc/self/ns/pid") if "pidns: yes" in notes else None
    os.write(fd, json.dumps({"notes": notes, "pidns": pidns}).encode())
    os.close(fd)
    os.chdir(cfg["workdir"])
    os.execve(cfg["argv"][0], cfg["argv"], cfg["env"])


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
