# hostile: at load, tries to have the kernel signal the process that started it (a warm worker forks every later
# student from it) by routes that name it through a descriptor: its /proc folder opened as a pidfd
# (pidfd_send_signal), a pipe's I/O signal owner (fcntl F_SETOWN; with O_ASYNC and F_SETSIG the next write sends
# any signal, SIGSTOP included) and a socket's (ioctl FIOSETOWN); signal 0 or no write, so an allowed attempt
# harms nothing; prints which attempts the kernel allowed
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave2.py appends it to its base)
import fcntl as _fcntl
import os as _os
import signal as _signal
import socket as _socket
import struct as _struct


def _route_signals():
    pp = _os.getppid()
    tries = {
        "fd-owner": lambda: _fcntl.fcntl(_os.pipe()[0], _fcntl.F_SETOWN, pp),          # OP signal-owner load
        "socket-owner": lambda: _fcntl.ioctl(_socket.socketpair()[0], 0x8901, _struct.pack("i", pp)),  # FIOSETOWN
        "init-owner": lambda: _fcntl.fcntl(_os.pipe()[0], _fcntl.F_SETOWN, 1),
    }
    if hasattr(_signal, "pidfd_send_signal"):
        tries["pidfd"] = lambda: _signal.pidfd_send_signal(_os.open(f"/proc/{pp}", _os.O_RDONLY | _os.O_DIRECTORY), 0)
    print("ROUTED", " ".join(f"{name}-{_outcome(fn)}" for name, fn in tries.items()))


def _outcome(fn) -> str:
    try:
        fn()
    except (OSError, ValueError):
        return "REFUSED"
    return "ALLOWED"


class _AtLoad:                 # a class body runs when the file loads
    _route_signals()
