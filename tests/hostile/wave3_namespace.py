# hostile: at load, reads which user, IPC and mount namespace it runs in and what its scratch places hold (a run
# that shared them with the next one could pass it keys, queues, IPC objects and files), writes to /tmp,
# whether it holds any capability, tries to make a user namespace of its own (every capability inside it)
# through unshare and clone3, and to unmount its /tmp or mount over it: raw system calls through ctypes
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave2.py appends it to its base)
import ctypes as _ct
import os as _os
import platform as _platform

class _AtLoad:                 # a class body runs when the file loads
    print("NS", _os.readlink("/proc/self/ns/user"), _os.readlink("/proc/self/ns/ipc"), _os.readlink("/proc/self/ns/mnt"))
    with open("/proc/self/status") as _f:
        print("CAPS", " ".join(ln.split()[1] for ln in _f if ln.startswith(("CapEff:", "CapPrm:", "CapBnd:"))))
    print("UID", _os.getuid(), _os.getgid())
    for _top in ("/tmp", "/var/tmp", "/dev/shm"):     # the run's scratch places: how big, what they hold
        _st = _os.statvfs(_top)
        print("SCRATCH", _top, _st.f_blocks * _st.f_frsize, ",".join(sorted(_os.listdir(_top))) or "-")
    with open("/proc/self/mountinfo") as _f:        # each mount point and its file system
        print("MOUNTS", " ".join(f"{ln.split()[4]}={ln.split(' - ')[1].split()[0]}" for ln in _f))
    try:                       # write where the next run might look
        with open("/tmp/left-by-a-run", "w") as _f:
            _f.write("x")
        print("WROTE /tmp")
    except OSError as _e:
        print("WROTE refused", _e.errno)
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
    _libc = _ct.CDLL(None, use_errno=True)   # uncover the worker's /tmp below the run's own, or mount over it
    _libc.umount2.argtypes = [_ct.c_char_p, _ct.c_int]
    _r = _libc.umount2(b"/tmp", 2)                                                   # MNT_DETACH
    print("UMOUNT", "allowed" if _r == 0 else _os.strerror(_ct.get_errno()))
    _libc.mount.argtypes = [_ct.c_char_p, _ct.c_char_p, _ct.c_char_p, _ct.c_ulong, _ct.c_char_p]
    _r = _libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None)
    print("MOUNT", "allowed" if _r == 0 else _os.strerror(_ct.get_errno()))
