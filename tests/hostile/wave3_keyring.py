# hostile: at load, looks for a key an earlier run left in the kernel's key store (the uid's user keyring, which
# outlives a run inside its warm worker), then leaves one there for the next run: a channel between students
# through the kernel, no file involved (raw system calls through ctypes)
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave2.py appends it to its base)
import ctypes as _ct
import platform as _platform

class _AtLoad:                 # a class body runs when the file loads
    _NR = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(_platform.machine())     # add_key, keyctl
    _USER_KEYRING, _SEARCH, _READ = -4, 10, 11
    if _NR is not None:
        _libc = _ct.CDLL(None, use_errno=True)
        _libc.syscall.restype = _ct.c_long
        _name = b"mtxdiag-{{MARK}}"
        _id = _libc.syscall(_NR[1], _SEARCH, _ct.c_int(_USER_KEYRING), b"user", _name, 0)
        _buf = _ct.create_string_buffer(64)
        _n = _libc.syscall(_NR[1], _READ, _ct.c_long(_id), _buf, 64) if _id > 0 else -1
        print("FOUND", _buf.raw[:_n].decode() if _n > 0 else "nothing")
        _added = _libc.syscall(_NR[0], b"user", _name, b"LEFT-BY-AN-EARLIER-RUN", 22, _ct.c_int(_USER_KEYRING))
        print("ADD", "allowed" if _added > 0 else "refused")
