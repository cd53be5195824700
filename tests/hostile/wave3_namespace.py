# hostile: at load, reads which user and IPC namespace it runs in (a run that shared them with the next one
# could pass it keys, queues and IPC objects), whether it holds any capability, and tries to make a user
# namespace of its own (every capability inside it) through unshare and clone3, raw system calls through ctypes
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave2.py appends it to its base)
import ctypes as _ct
import os as _os
import platform as _platform

class _AtLoad:                 # a class body runs when the file loads
    print("NS", _os.readlink("/proc/self/ns/user"), _os.readlink("/proc/self/ns/ipc"))
    try:                       # the sandbox's init: in the namespaces the warm worker has
        print("INIT", _os.readlink("/proc/1/ns/user"), _os.readlink("/proc/1/ns/ipc"))
    except OSError as _e:
        print("INIT unreadable", _e.errno)
    with open("/proc/self/status") as _f:
        print("CAPS", " ".join(ln.split()[1] for ln in _f if ln.startswith(("CapEff:", "CapPrm:", "CapBnd:"))))
    print("UID", _os.getuid(), _os.getgid())
    _NR = {"x86_64": (272, 435), "aarch64": (97, 435)}.get(_platform.machine())     # unshare, clone3
    if _NR is not None:
        _libc = _ct.CDLL(None, use_errno=True)
        _libc.syscall.restype = _ct.c_long
        _r = _libc.syscall(_NR[0], _ct.c_ulong(0x10000000))                          # CLONE_NEWUSER
        print("UNSHARE", "allowed" if _r == 0 else _os.strerror(_ct.get_errno()))
        _args = (_ct.c_uint64 * 11)(0x10000000)                                      # clone_args.flags
        _r = _libc.syscall(_NR[1], _args, _ct.c_size_t(88))
        if _r == 0:
            _os._exit(0)                   # the clone: leave at once
        print("CLONE3", "allowed" if _r > 0 else _os.strerror(_ct.get_errno()))
