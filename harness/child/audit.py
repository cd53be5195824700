"""What the student's code tried to do outside its lane, recorded in the child (PEP 578 audit hooks).

The sandbox blocks a connection, a read of another student's file or a write into the output folder
silently; the instructor should still learn that the code tried. `install()` adds an audit hook (it cannot
be removed once added) before any student code runs. The hook records, with the student's file and line
(the first frame in their code):

* network: socket connect, bind and sendto;
* files: opens for reading and for writing (and deletes, renames, mkdir: writes) outside the submission's
  own scratch folder and the Python installation; directory listings outside the scratch folder;
* processes: subprocess, os.system, os.exec*, os.posix_spawn, os.spawn*, os.fork, os.kill/killpg, and
  resource.prlimit on another process (its worker: refused by confine.py);
* signals routed through a descriptor: fcntl F_SETOWN / F_SETOWN_EX / F_SETSIG, ioctl FIOSETOWN / SIOCSPGRP
  (refused by confine.py's filter, except F_SETSIG);
* native code: ctypes loading a library, looking up or calling its functions, reading raw memory;
* introspection: a frame or the heap handed to the student's code (sys._getframe, tb_frame, gi_frame,
  f_back, inspect.stack(), gc.get_objects/get_referrers): the grader's state is reachable from there, so
  the parent is also told at once (`notify`), before the code holds the frame.

Who did it matters, not only what: the first frame outside the standard library decides. The student's
own frame is held to the strict rules above. A library frame (torch, numpy, matplotlib) called from the
student's code is the library's business for what libraries do (reading /proc, /usr, fonts; torch's
compiler and DataLoader workers; loading native code); it is reported for what no library does on its own
for itself: network, writes outside the scratch folder, reads and listings of other people's folders and of
the grader's files (numpy.loadtxt of the reference counts), processes (torch.utils.collect_env.run counts).
Events without the student's code on the stack, or with the grader's own code nearest (its interceptor
inside the student's forward), are the harness's own and are never recorded.

Records are bounded: at most MAX_PER_KIND distinct records of one kind (`list`, `read`, `subprocess`, ...) and
MAX_RECORDS in all, but a kind's first record is always kept, so decoys of one kind cannot push another kind
out; every attempt is counted by kind (`counts`), kept or not, and repeats of a record are counted on it. Whether the sandbox blocked an attempt is
decided at the end (`attempts()`), from what the child can see: a file that is not there or not
accessible was blocked; under bubblewrap the network was not reachable.
"""
from __future__ import annotations

import os
import struct as _struct
import sys

from ..identity import PACK_PACKAGES, PACKAGES

MAX_RECORDS = 50        # distinct records in all (beyond it, only a new kind's first record is kept)
MAX_PER_KIND = 12       # distinct records of one kind

_NET = {"socket.connect": "connect", "socket.bind": "bind", "socket.sendto": "sendto"}
_PROC = {"subprocess.Popen": "subprocess", "os.system": "os.system", "os.exec": "os.exec", "os.posix_spawn":
         "os.posix_spawn", "os.spawn": "os.spawn", "os.fork": "os.fork", "os.forkpty": "os.fork",
         "os.kill": "os.kill", "os.killpg": "os.kill", "pty.spawn": "pty.spawn"}
_WRITES = {"os.remove": "delete", "os.rename": "rename", "os.rmdir": "delete", "os.mkdir": "mkdir",
           "shutil.rmtree": "delete", "os.truncate": "write", "os.symlink": "write", "os.link": "write",
           "os.chmod": "write", "os.chown": "write", "os.utime": "write"}
_LISTS = {"os.listdir": "list", "os.scandir": "list", "glob.glob": "list"}
# Native calls through ctypes (functions of a library already loaded, raw memory): reported like ctypes.dlopen.
_CTYPES = {"ctypes.dlsym": "ctypes", "ctypes.dlsym/handle": "ctypes", "ctypes.call_function": "ctypes",
           "ctypes.string_at": "ctypes", "ctypes.wstring_at": "ctypes", "ctypes.cdata": "ctypes",
           "ctypes.cdata/buffer": "ctypes", "ctypes.addressof": "ctypes", "ctypes.PyObj_FromPtr": "ctypes"}
# Ways to a frame or to arbitrary objects of the process: from there the grader's own state (its result, its
# channel, this record) is one attribute away. `object.__getattr__` is raised for tb_frame, gi_frame, ...
# A trace or profile function is handed every frame; a code object under another file's name forges a frame's
# origin (the guard and this hook tell the student's frames by their file): introspection too.
_INTROSPECT = {"sys._getframe": "sys._getframe", "sys._current_frames": "sys._current_frames",
               "gc.get_objects": "gc.get_objects", "gc.get_referrers": "gc.get_referrers",
               "gc.get_referents": "gc.get_referents", "object.__getattr__": None,
               "sys.settrace": "sys.settrace", "sys.setprofile": "sys.setprofile", "code.__new__": None}
_FRAME_ATTRS = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"))
# Making a descriptor send its I/O signals to a process (the worker, with O_ASYNC and F_SETSIG: any signal, at
# the next write): refused by confine.py's filter, reported here. (call, request) -> its name.
_SIGNAL_OWNER = {("fcntl.fcntl", 8): "F_SETOWN", ("fcntl.fcntl", 15): "F_SETOWN_EX", ("fcntl.fcntl", 10): "F_SETSIG",
                 ("fcntl.ioctl", 0x8901): "FIOSETOWN", ("fcntl.ioctl", 0x8902): "SIOCSPGRP"}
EVENTS = frozenset(("open", "ctypes.dlopen", "resource.prlimit", "fcntl.fcntl", "fcntl.ioctl") + tuple(_NET) +
                   tuple(_PROC) + tuple(_WRITES) + tuple(_LISTS) + tuple(_CTYPES) + tuple(_INTROSPECT))
# Libraries that start processes of their own for what the student asked: torch's compiler workers and a
# DataLoader's workers. Any other library starting one while the student's code is on the stack is reported.
_SPAWNERS = ("torch/_inductor/", "torch/_dynamo/", "torch/utils/data/")
# Where libraries read on their own (shared objects, fonts, CPU info): not the student's doing.
_SYSTEM = ("/usr/", "/lib/", "/lib32/", "/lib64/", "/etc/", "/proc/", "/sys/", "/dev/", "/opt/", "/var/",
           "/run/", "/bin/", "/sbin/", "/snap/")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/full", "/dev/tty", "/dev/shm/")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _root(p: str) -> str:
    return os.path.realpath(p).rstrip("/") + "/"


class Audit:
    def __init__(self, student_path: str, scratch: str, grader_roots=(), isolation: str = ""):
        self.student_path = student_path
        self.scratch = _root(scratch)
        self.isolation = isolation
        import site
        import sysconfig
        roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                 *site.getsitepackages(), sysconfig.get_paths().get("stdlib", "")}
        try:
            roots.add(site.getusersitepackages())
        except Exception:
            pass
        self.grader = tuple(_root(g) for g in grader_roots if g)
        self.python = tuple(sorted({_root(r) for r in roots if r} - set(self.grader)))
        self.stdlib = tuple(_root(p) for p in {sysconfig.get_paths().get("stdlib", ""),
                                               sysconfig.get_paths().get("platstdlib", "")} if p)
        self.site = tuple(_root(p) for p in site.getsitepackages())
        self.records = {}        # key -> record
        self.dropped = 0         # distinct attempts not kept (their kind's count has them)
        self.counts = {}         # kind (op) -> every attempt of that kind, kept or not, repeats included
        self._kept = {}          # kind -> distinct records kept
        self.phase = "loading your file"
        self._busy = False
        self.notify = None       # set by the child: tells the parent at once (the record itself can be emptied)
        self._told = set()
        self._pid = os.getpid()  # only this process speaks on the result channel (a side fork does not)
        import inspect
        import logging
        import traceback
        self._inspect = os.path.realpath(inspect.__file__)
        self._traceback = os.path.realpath(traceback.__file__)
        self._logging = os.path.realpath(logging.__file__) if os.path.exists(logging.__file__) else logging.__file__
        self.torch_dir = _torch_dir()
        self.thread_start = None     # threads.py: the code at the bottom of every thread the student's code started

    # -- the hook ----------------------------------------------------------------
    def hook(self, event, args):
        if event not in EVENTS or self._busy:
            return
        self._busy = True
        try:
            self._on(event, args)
        except BaseException:        # an audit hook that raises would abort the operation: never
            pass
        finally:
            self._busy = False

    def is_student(self, name) -> bool:
        """A frame of the submission: its file, or any file of a submitted repository."""
        sp = self.student_path
        return name == sp or (isinstance(name, str) and name.startswith(sp.rstrip("/") + "/"))

    def _on(self, event, args):
        if event in _INTROSPECT:
            return self._introspection(event, args)
        who = self._who()
        if who is None:
            return                   # no student code on the stack: the harness's own operation
        actor, line = who
        student = actor == "student"
        if not student and self.grader and actor.startswith(self.grader):
            return                   # the grader's own code, run inside a call into the student's
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            if isinstance(path, int) or path is None:
                return
            write = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
            self._file("write" if write else "read", path, line, student, actor=actor)
        elif event in _WRITES:
            self._file("write", args[0] if args else None, line, student, _WRITES[event], actor)
            if event == "os.rename" and len(args) > 1:
                self._file("write", args[1], line, student, "rename", actor)
        elif event in _LISTS:
            path = args[0] if args else "."
            self._file("list", "." if path is None else path, line, student, actor=actor)
        elif event in _NET:
            addr = args[1] if len(args) > 1 else None
            self._add(_NET[event], _addr(addr), line, actor)
        elif event in _PROC and (student or not _under(actor, _SPAWNERS)):
            target = args[0] if args and event != "os.fork" else ""
            if event in ("subprocess.Popen", "os.exec", "os.posix_spawn") and len(args) > 1:
                target = _short(args[1])
            elif event in ("os.kill", "os.killpg"):
                target = f"pid {args[0]}, signal {args[1]}" if len(args) > 1 else _short(args)
            self._add(_PROC[event], _short(target), line, actor)
        elif event == "ctypes.dlopen" and (student or not self._torch(actor)):
            self._add("ctypes", _short(args[0] if args else None) or "the process itself", line, actor)
        elif event == "resource.prlimit" and args and args[0] not in (0, os.getpid()):
            # another process's limits: its worker's, the sandbox's (refused by confine.py's filter)
            self._add("prlimit", f"pid {args[0]}", line, actor)
        elif event in ("fcntl.fcntl", "fcntl.ioctl") and len(args) > 2 and (event, args[1]) in _SIGNAL_OWNER:
            arg = args[2]            # ioctl's is the pid packed as a C int
            arg = _struct.unpack("i", arg)[0] if isinstance(arg, (bytes, bytearray)) and len(arg) == 4 else arg
            arg = arg if isinstance(arg, int) else _short(arg, 40)
            self._add("signal-owner", f"{_SIGNAL_OWNER[event, args[1]]} {arg}", line, actor)
        elif event in _CTYPES and student:
            self._add("ctypes", event, line, actor)

    def _torch(self, name) -> bool:
        return bool(self.torch_dir) and isinstance(name, str) and name.startswith(self.torch_dir)

    def _introspection(self, event, args):
        """A frame (or the heap) handed to the student's code: its own call, or inspect's/traceback's/logging's
        walk on its behalf. Libraries using frames for themselves (warnings, typing, torch) are not the student."""
        if event == "object.__getattr__":
            if len(args) < 2 or args[1] not in _FRAME_ATTRS:
                return
            what = args[1]
        elif event == "code.__new__":     # code.replace(co_filename=...), types.CodeType(...): args[1] its file
            if len(args) < 2 or self.is_student(args[1]):
                return
            what = "a code object named " + _short(args[1], 120)
        else:
            what = _INTROSPECT[event]
        f = sys._getframe(3)         # 0: _introspection, 1: _on, 2: hook; 3: the code that raised the event
        while f is not None:
            name = f.f_code.co_filename
            if name == self._inspect or (name == self._traceback and f.f_code.co_name in ("walk_stack", "walk_tb")) \
                    or (name == self._logging and f.f_code.co_name == "<lambda>"):
                f = f.f_back         # inspect.stack(), traceback.walk_tb(), logging.currentframe(): for the caller
                continue
            break
        if f is None or not self.is_student(f.f_code.co_filename):
            return
        self.introspected(what, f.f_lineno)

    def introspected(self, what: str, line):
        """Recorded, and told to the parent at once (also the guard's: a signal handler, a threading hook)."""
        self._add("introspection", what, line, "student")
        if self.notify is not None and what not in self._told and os.getpid() == self._pid and len(self._told) < 8:
            self._told.add(what)
            self.notify(f"frame or heap introspection from the submission's code ({what}, line {line}, during "
                        f"{self.phase})")

    def _who(self, f=None):
        """('student' | library file, the student's line) or None when the student's code is not on the stack.
        In a thread the student's code started (threads.py), the line that started it stands for the student."""
        f = f or sys._getframe(3)    # 0: _who, 1: _on, 2: hook; 3: the code that raised the event
        actor = None
        while f is not None:
            name = f.f_code.co_filename
            if self.is_student(name):
                return (actor or "student"), f.f_lineno
            if f.f_code is self.thread_start:        # the bottom of a thread the student's code started
                return (actor or "student"), f.f_locals["self"].line
            if actor is None and not (name.startswith("<frozen") or
                                      (name.startswith(self.stdlib) and not name.startswith(self.site))):
                actor = name
            f = f.f_back
        return None

    def _file(self, kind, path, line, student, op=None, actor=None):
        try:
            path = os.fsdecode(path)
        except Exception:
            return
        full = os.path.realpath(os.path.join(os.getcwd(), path))
        full_dir = full.rstrip("/") + "/"
        if full_dir.startswith(self.scratch) or full.startswith(_DEVICES) or full in _DEVICES:
            return
        if kind != "write":
            # The student's own reads of the grader's files count; torch reading them is dynamo or a traceback
            # looking at the harness frames on the stack.
            if self.grader and full_dir.startswith(self.grader) and (student or not self._torch(actor)):
                pass                 # the grader's files, read by the student or a library it called
            elif full_dir.startswith(self.python if student else self.python + _SYSTEM + self.grader):
                return
        if kind == "write" and not student and full_dir.startswith(("/dev/", "/proc/")):
            return
        self._add(op or kind, full, line, "student" if student else "library")

    def _add(self, op, target, line, actor):
        self.counts[op] = self.counts.get(op, 0) + 1
        key = (op, target, line)
        rec = self.records.get(key)
        if rec is not None:
            rec["count"] += 1
            return
        kept = self._kept.get(op, 0)
        if kept and (kept >= MAX_PER_KIND or len(self.records) >= MAX_RECORDS):
            self.dropped += 1    # a kind's first record is always kept: decoys cannot hide another kind
            return
        self._kept[op] = kept + 1
        self.records[key] = {"op": op, "target": target, "line": line, "during": self.phase, "count": 1,
                             "via": "your code" if actor == "student" else "a library called by your code"}

    # -- the report ---------------------------------------------------------------
    def add_finding(self, op, target, line):
        """A finding from elsewhere in the child (the tamper guard's sys.modules record)."""
        self._add(op, target, line, "student")

    def attempts(self) -> list[dict]:
        """The records, each with whether the sandbox blocked it (decided now, outside the hook)."""
        was, self._busy = self._busy, True      # our own checks below are not the student's operations
        try:
            out = []
            for rec in self.records.values():
                rec = dict(rec)
                rec["blocked"] = self._blocked(rec)
                out.append(rec)
            return out
        finally:
            self._busy = was

    def _blocked(self, rec):
        op, target = rec["op"], rec["target"]
        try:
            if op in ("read", "list"):
                return not os.access(target, os.R_OK)
            if op in ("write", "delete", "rename", "mkdir"):
                return not os.access(os.path.dirname(target) or "/", os.W_OK)
        except Exception:
            return None
        if op in ("connect", "sendto"):
            return True if self.isolation == "bwrap" else None
        return False if op in ("subprocess", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                               "os.fork", "pty.spawn") else None


def _torch_dir() -> str | None:
    """torch's folder (its own frames may read the grader's source and start its compiler), never importing it."""
    try:
        import importlib.util
        spec = importlib.util.find_spec("torch")
        origin = spec.origin if spec else None
    except (ImportError, ValueError):
        origin = None
    return os.path.dirname(os.path.realpath(origin)) + "/" if origin else None


def _under(name, parts) -> bool:
    return isinstance(name, str) and any(p in name for p in parts)


def _addr(a) -> str:
    if isinstance(a, tuple) and len(a) >= 2:
        return f"{a[0]}:{a[1]}"
    return _short(a)


def _short(x, n=160) -> str:
    try:
        if isinstance(x, (list, tuple)):
            x = " ".join(os.fsdecode(p) if isinstance(p, (str, bytes)) else str(p) for p in list(x)[:12])
        elif isinstance(x, bytes):
            x = os.fsdecode(x)
        s = x if isinstance(x, str) else repr(x)
    except Exception:
        return "?"
    return s if len(s) <= n else s[:n] + "..."


def grader_roots() -> list[str]:
    """The grader's own folders (the harness, the reference solution, the mutants, the packs' packages): never the
    student's to read."""
    roots = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    for name in (p for p in PACKAGES + PACK_PACKAGES if p != "harness"):      # harness is this folder's parent
        mod = sys.modules.get(name)
        f = getattr(mod, "__file__", None)
        if isinstance(f, str):
            roots.append(os.path.dirname(os.path.abspath(f)))
    return roots


def install(student_path: str, scratch: str, isolation: str = "") -> Audit:
    """Add the hook (for the rest of this process's life) and return its record."""
    audit = Audit(student_path, scratch, grader_roots(), isolation)
    sys.addaudithook(audit.hook)
    from .threads import watch_threads
    watch_threads(audit)
    return audit
