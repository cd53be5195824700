"""What keeps a run from changing the processes around it (its warm worker, the sandbox's init, a grader
without the sandbox), and how a worker tells that it was changed anyway.

Student code runs under the same uid as its warm worker (zygote.py; a run's own user namespace maps the uid onto
itself: without privilege there is no other to take), so the kernel lets it lower the worker's
resource limits (`prlimit(getppid(), ...)`), renice it (`setpriority`, also for a whole process group or
every process of the uid), change its scheduling policy or CPU affinity, or signal it; every later run forked
from that worker would inherit the damage. Two layers:

* `protect(pids)`: before any student code, the child installs a seccomp filter (no privilege needed, after
  PR_SET_NO_NEW_PRIVS) under which those calls fail with EPERM when they name a protected process or thread
  (the worker, the sandbox's init, the cold child's parent), a process group of one, or every process of the
  uid (PRIO_USER, IOPRIO_WHO_USER, kill(-1)). Calls that name their target where the filter cannot look
  (pidfd_send_signal on a /proc/<pid> folder; a descriptor's signal owner, F_SETOWN and its kin) always
  fail, and so does the kernel's key store (add_key, request_key, keyctl: a key one run leaves in the uid's
  keyring is there for the next run of the same worker), and so does making a user namespace (unshare or clone
  with CLONE_NEWUSER; clone3, whose flags the filter cannot read, does not exist: glibc falls back to clone;
  bubblewrap's --disable-userns cannot be used for a warm worker, whose forks make one each: private_namespaces).
  The filter is inherited by everything the run starts and cannot be removed. Calls on the run's own processes
  are untouched. Other architectures than x86_64 and aarch64 get no filter; the second layer still holds.
* `own_state()` / `changes()`: the worker records its own limits, and per thread its nice value, priority,
  scheduling policy and CPU affinity, when it starts, and compares after every run; any difference
  retires it and is reported against the run that made it (warm.py, runner.py).
"""
from __future__ import annotations

import os
import platform
import resource
import struct

_NATIVE = {  # machine -> (AUDIT_ARCH, syscall numbers)
    "x86_64": (0xC000003E, {"kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
                            "rt_tgsigqueueinfo": 297, "setpriority": 141, "sched_setparam": 142,
                            "sched_setscheduler": 144, "sched_setaffinity": 203, "sched_setattr": 314,
                            "ioprio_set": 251, "prlimit64": 302, "migrate_pages": 256, "move_pages": 279,
                            "pidfd_open": 434, "pidfd_send_signal": 424, "fcntl": 72, "ioctl": 16,
                            "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272, "clone": 56,
                            "clone3": 435}),
    "aarch64": (0xC00000B7, {"kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138,
                             "rt_tgsigqueueinfo": 240, "setpriority": 140, "sched_setparam": 118,
                             "sched_setscheduler": 119, "sched_setaffinity": 122, "sched_setattr": 274,
                             "ioprio_set": 30, "prlimit64": 261, "migrate_pages": 238, "move_pages": 239,
                             "pidfd_open": 434, "pidfd_send_signal": 424, "fcntl": 25, "ioctl": 29,
                             "add_key": 217, "request_key": 218, "keyctl": 219, "unshare": 97, "clone": 220,
                             "clone3": 435}),
}
_ALLOW, _EPERM, _ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06   # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, JMP|JSET|K, RET|K
_PRIO_USER, _IOPRIO_WHO_USER = 2, 3
# Ways to have the kernel signal a process named by something the filter cannot read (a descriptor, a
# struct): the owner of a descriptor's I/O signals (fcntl F_SETOWN / F_SETOWN_EX, ioctl FIOSETOWN /
# SIOCSPGRP; with O_ASYNC and F_SETSIG its next write sends any signal, SIGSTOP included), and
# pidfd_send_signal, which also takes a /proc/<pid> folder opened as a descriptor. No model needs them.
F_SETOWN, F_SETOWN_EX = 8, 15
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902
ALWAYS = None          # a rule that refuses the call whatever its arguments
CLONE_NEWUSER, CLONE_NEWIPC, CLONE_NEWNS = 0x10000000, 0x08000000, 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE, MNT_DETACH = 2, 4, 8, 4096, 16384, 1 << 18, 2


class Flags(tuple):
    """A rule that refuses the call when its argument (index, mask) has any of the mask's bits set."""


class Absent(tuple):
    """A rule under which the call does not exist (ENOSYS): its caller falls back to an older one the filter
    can read (glibc: clone3, whose flags are in a struct, -> clone)."""


def _arg(i: int) -> int:
    return 16 + 8 * i          # offsetof(struct seccomp_data, args[i]), the low 32 bits (little endian)


def _program(arch: int, nrs: dict, pids: list[int], x86: bool) -> list[tuple]:
    """The filter: for each call, deny when an argument names a protected pid (or the whole uid)."""
    neg = [(-p) & 0xFFFFFFFF for p in pids]
    all_procs = 0xFFFFFFFF               # kill(-1, ...): every process the caller may signal
    rules = {
        "prlimit64": [(0, pids)], "sched_setparam": [(0, pids)], "sched_setscheduler": [(0, pids)],
        "sched_setaffinity": [(0, pids)], "sched_setattr": [(0, pids)], "migrate_pages": [(0, pids)],
        "move_pages": [(0, pids)], "pidfd_open": [(0, pids)], "tkill": [(0, pids)], "tgkill": [(0, pids)],
        "rt_sigqueueinfo": [(0, pids + neg)], "rt_tgsigqueueinfo": [(0, pids)],
        "kill": [(0, pids + neg + [all_procs])],
        "setpriority": [(0, [_PRIO_USER]), (1, pids)],
        "ioprio_set": [(0, [_IOPRIO_WHO_USER]), (1, pids)],
        "fcntl": [(1, [F_SETOWN, F_SETOWN_EX])], "ioctl": [(1, [FIOSETOWN, SIOCSPGRP])],
        "pidfd_send_signal": ALWAYS,
        # the kernel's key store: its user keyring belongs to the uid in the sandbox's user namespace, so a key
        # one run adds there is read by every later run of the same warm worker (a channel between students)
        "add_key": ALWAYS, "request_key": ALWAYS, "keyctl": ALWAYS,
        # a user namespace of the run's making: every capability inside it, and the kernel's code that only
        # privileged users reach otherwise (a warm worker's run gets its own before its code runs: zygote.py)
        "unshare": Flags((0, CLONE_NEWUSER)), "clone": Flags((0, CLONE_NEWUSER)), "clone3": Absent(),
    }
    prog = [(_LD, 0, 0, 4), (_JEQ, 1, 0, arch), (_RET, 0, 0, _EPERM), (_LD, 0, 0, 0)]
    if x86:
        prog += [(_JGE, 0, 1, 0x40000000), (_RET, 0, 0, _EPERM)]     # the x32 ABI: never the harness's
    for name, conds in rules.items():
        if conds is ALWAYS or isinstance(conds, Absent):
            prog += [(_JEQ, 0, 1, nrs[name]), (_RET, 0, 0, _EPERM if conds is ALWAYS else _ENOSYS)]
            continue
        if isinstance(conds, Flags):
            i, mask = conds        # the flag set: refused; else allowed (A is overwritten: nothing follows)
            prog += [(_JEQ, 0, 4, nrs[name]), (_LD, 0, 0, _arg(i)), (_JSET, 1, 0, mask), (_RET, 0, 0, _ALLOW),
                     (_RET, 0, 0, _EPERM)]
            continue
        block = []
        for i, values in conds:
            block.append((_LD, 0, 0, _arg(i)))
            block += [(_JEQ, None, 0, v & 0xFFFFFFFF) for v in values]
        block += [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, _EPERM)]
        n = len(block)
        block = [(c, (n - 2 - k) if jt is None else jt, jf, v) for k, (c, jt, jf, v) in enumerate(block)]
        if n > 250:
            raise ValueError("too many protected pids for one filter")
        prog.append((_JEQ, 0, n, nrs[name]))       # not this call: skip its block (A still holds the number)
        prog += block
    prog.append((_RET, 0, 0, _ALLOW))
    return prog


def filter_works() -> bool:
    """This machine gets the filter (its architecture is known, the kernel has seccomp filters): only then may a
    warm worker's sandbox let its runs make user namespaces (the filter is what forbids them to student code)."""
    if platform.machine() not in _NATIVE:
        return False
    try:
        with open("/proc/self/status") as f:
            return any(ln.startswith("Seccomp_filters:") for ln in f)
    except OSError:
        return False


def private_namespaces(fresh: dict | None = None) -> bool:
    """In a warm worker's fork, before any student code (zygote.py): a user namespace and an IPC namespace of
    the run's own, then no capability in them. The uid is mapped onto itself (a run sees the uid a cold run
    sees), but what the kernel keeps per user namespace (the uid's keyrings, System V IPC, POSIX queues, the
    owner of the run's processes) is this run's alone and dies with it; the filter (protect) then keeps the
    run from making another one. With `fresh` ({folder: (size in bytes, mount points in it to keep)}) also a
    mount namespace of its own, where each of those writable folders is a new, empty, size-capped tmpfs
    (fresh_scratch): what the run writes there is never the worker's and is gone with the run's last process.
    False where the kernel refuses (the run goes on as before: the filter and the worker's emptying and
    checks after the run still hold). The calling process must be single-threaded."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWIPC | (CLONE_NEWNS if fresh else 0)) != 0:
            return False
    except Exception:       # noqa: BLE001 - no namespace of its own: the run is isolated as before
        return False
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        mapped = True
    except OSError:
        mapped = False
    if mapped and fresh:
        fresh_scratch(libc, fresh)
    return _drop_capabilities(libc) and mapped     # whatever the maps did: no capability reaches student code


def fresh_scratch(libc, fresh: dict) -> list[str]:
    """In a mount namespace of the run's own (its user namespace's, so the mounts die with the run): a new
    tmpfs over each writable folder, capped at its size and with the folder's mode; the mounts the sandbox
    placed inside it (the worker's own folder, bound from the host, with the run's folder in it) are bound
    again at the same paths. Returns the folders made fresh; one that fails is left as the worker's."""
    import ctypes
    import stat
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:     # nothing of ours propagates out
        return []
    done = []
    for top, (size, keep) in sorted(fresh.items()):
        held = []
        try:
            mode = stat.S_IMODE(os.stat(top).st_mode)
            for m in sorted(keep, key=len):              # outer mount points first: inner ones come with them
                held.append((m, os.open(m, os.O_PATH | os.O_NOFOLLOW), os.path.isdir(m)))
            if libc.mount(b"tmpfs", top.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                          f"size={int(size)},mode={mode:o}".encode()) != 0:
                continue
            try:
                for m, fd, is_dir in held:
                    os.makedirs(m if is_dir else os.path.dirname(m), exist_ok=True)
                    if not is_dir:
                        open(m, "a").close()
                    if libc.mount(f"/proc/self/fd/{fd}".encode(), m.encode(), None, MS_BIND | MS_REC, None) != 0:
                        raise OSError(ctypes.get_errno(), f"bind {m}")
            except OSError:                              # the run must reach its folder: the worker's tmpfs again
                libc.umount2(top.encode(), MNT_DETACH)
                continue
            done.append(top)
        except OSError:
            continue
        finally:
            for _, fd, _ in held:
                os.close(fd)
    # POSIX queues made through /dev/mqueue's files land in the IPC namespace of whoever mounted it (the
    # worker's): the run's own namespace gets a view of its own there
    if os.path.ismount("/dev/mqueue") and libc.mount(b"mqueue", b"/dev/mqueue", b"mqueue",
                                                     MS_NOSUID | MS_NODEV | MS_NOEXEC, None) == 0:
        done.append("/dev/mqueue")
    return done


def _drop_capabilities(libc) -> bool:
    """Every capability the new user namespace gave this process, gone for good: the bounding and ambient sets
    emptied, then effective, permitted and inheritable (capset, version 3)."""
    import ctypes
    for cap in range(64):
        if libc.prctl(24, cap, 0, 0, 0) != 0:           # PR_CAPBSET_DROP; EINVAL past the last capability
            break
    libc.prctl(47, 4, 0, 0, 0)                           # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]
    return libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()) == 0


def tids_of(pid: int) -> list[int]:
    """The threads of a process (its pid first); [pid] when they cannot be listed."""
    try:
        return [pid] + sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if t.isdigit() and int(t) != pid)
    except OSError:
        return [pid]


def protect(pids) -> bool:
    """Install the filter in the calling (single-threaded) process; False when it cannot be installed."""
    pids = sorted({int(p) for p in pids if isinstance(p, int) and p > 0})[:100]
    native = _NATIVE.get(platform.machine())
    if not pids or native is None:
        return False
    try:
        import ctypes
        prog = _program(native[0], native[1], pids, platform.machine() == "x86_64")
        raw = b"".join(struct.pack("HBBI", c, jt, jf, k) for c, jt, jf, k in prog)
        buf = ctypes.create_string_buffer(raw, len(raw))

        class Prog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
        fprog = Prog(len(prog), ctypes.addressof(buf))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
        if libc.prctl(38, 1, None, 0, 0) != 0:                          # PR_SET_NO_NEW_PRIVS
            return False
        return libc.prctl(22, 2, ctypes.addressof(fprog), 0, 0) == 0    # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    except Exception:
        return False


def protect_surroundings(prober: bool = False) -> bool:
    """The child, before student code: its parent (a warm worker, the sandbox's init, or the grader itself
    without the sandbox) with every thread, and pid 1 of its namespace. `prober`: a split run's prober (it runs
    no student code) also becomes non-dumpable: a process of the same user (the model server, where no PID
    namespace hides it) can then neither open its /proc/PID/mem or /proc/PID/fd nor ptrace it (root can)."""
    if prober:
        undumpable()
    return protect(tids_of(os.getppid()) + [1])


def undumpable() -> bool:
    """PR_SET_DUMPABLE 0 for this process (reset by an execve; a fork keeps it)."""
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) == 0
    except Exception:
        return False


# ---------------------------------------------------------------------------- the worker's own state

LIMITS = sorted({getattr(resource, n): n for n in sorted(dir(resource), reverse=True)
                 if n.startswith("RLIMIT_")}.values(), key=lambda n: getattr(resource, n))   # one name each


def own_state() -> dict:
    """This process's limits, and per thread: nice, priority, policy, real-time priority, CPU affinity."""
    limits = {}
    for name in LIMITS:
        try:
            limits[name] = resource.getrlimit(getattr(resource, name))
        except (OSError, ValueError):
            continue
    tasks = {}
    for tid in tids_of(os.getpid()):
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            # man 5 proc, counting from field 3 (state) at index 0: priority 18, nice 19, rt_priority 40, policy 41
            sched = tuple(int(fields[i - 3]) for i in (18, 19, 40, 41))
            tasks[tid] = sched + (tuple(sorted(os.sched_getaffinity(tid))),)
        except (OSError, IndexError, ValueError):
            continue
    try:
        with open("/proc/self/oom_score_adj") as f:
            oom = f.read().strip()
    except OSError:
        oom = None
    return {"limits": limits, "tasks": tasks, "oom": oom}


def changes(before: dict, now: dict | None = None) -> list[str]:
    """What differs from `before` (own_state() then): limits, per-thread scheduling, affinity."""
    now = now or own_state()
    out = []
    for name, was in before["limits"].items():
        cur = now["limits"].get(name)
        if cur != was:
            out.append(f"{name} {list(was)} -> {list(cur) if cur else cur}")
    for tid, was in before["tasks"].items():
        cur = now["tasks"].get(tid)
        if cur is not None and cur != was:
            what = ["priority", "nice", "real-time priority", "scheduling policy"]
            diff = [f"{w} {a} -> {b}" for w, a, b in zip(what, was[:4], cur[:4]) if a != b]
            if was[4] != cur[4]:
                diff.append(f"CPU affinity {list(was[4])} -> {list(cur[4])}")
            out.append(f"thread {tid}: " + ", ".join(diff))
    if before.get("oom") != now.get("oom"):
        out.append(f"oom_score_adj {before.get('oom')} -> {now.get('oom')}")
    return out


def restore(base: dict) -> None:
    """In a fresh fork: every limit, the nice value, policy and affinity back to the worker's recorded ones
    (they are the same unless the worker was changed; the worker then retires after this run)."""
    for name, (soft, hard) in base["limits"].items():
        try:
            resource.setrlimit(getattr(resource, name), (soft, hard))
        except (OSError, ValueError):
            pass
    main = next(iter(base["tasks"].values()), None)
    if main:
        try:
            os.sched_setaffinity(0, main[4])
        except OSError:
            pass
        try:
            if os.sched_getscheduler(0) != os.SCHED_OTHER and main[3] == os.SCHED_OTHER:
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            if os.getpriority(os.PRIO_PROCESS, 0) < main[1]:
                os.setpriority(os.PRIO_PROCESS, 0, main[1])
        except OSError:
            pass
