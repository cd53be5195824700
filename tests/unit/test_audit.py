"""The audit record in-process (harness/child/audit.py), without adding a hook to this process: events are handed to
`Audit.hook` by code compiled under the student's file name or a library's, so the frames are real."""
from __future__ import annotations

import os
import site
import types
from pathlib import Path

from harness.child import audit as audit_mod

STUDENT = "/scratch/submission.py"
LIBRARY = os.path.join(site.getsitepackages()[0], "somelib", "core.py")   # a third-party library's frame
TORCH = os.path.join(audit_mod._torch_dir() or "/nonexistent/torch/", "_inductor", "codecache.py")


def make(tmp_path, isolation=""):
    return audit_mod.Audit(STUDENT, str(tmp_path), grader_roots=[str(Path(audit_mod.__file__).parent)],
                           isolation=isolation)


def _fn(src: str, filename: str, name: str, **env):
    ns = dict(env)
    exec(compile(src, filename, "exec"), ns)
    return ns[name]


def student_calls(a, event, args, via_library=False, library=LIBRARY):
    """`event` raised by the student's line 2 - directly, or through a library function."""
    lib = _fn("def lib(h, e, x):\n    h(e, x)\n", library, "lib")
    if via_library:
        go = _fn("def go(h, e, x):\n    lib(h, e, x)\n", STUDENT, "go", lib=lib)
    else:
        go = _fn("def go(h, e, x):\n    h(e, x)\n", STUDENT, "go")
    go(a.hook, event, args)


def ops(a):
    return [(r["op"], r["target"], r["line"], r["via"]) for r in a.attempts()]


def test_the_students_own_operations_are_recorded_with_the_line(tmp_path):
    a = make(tmp_path)
    student_calls(a, "socket.connect", (None, ("10.0.0.1", 80)))
    student_calls(a, "open", ("/etc/passwd", "r", os.O_RDONLY))
    student_calls(a, "open", ("/home/other/out.json", "w", os.O_WRONLY | os.O_CREAT))
    student_calls(a, "os.listdir", ("/home",))
    student_calls(a, "subprocess.Popen", ("sleep", ["sleep", "100"], None, None))
    student_calls(a, "ctypes.dlopen", ("libc.so.6",))
    student_calls(a, "open", (audit_mod.__file__, "r", os.O_RDONLY))           # the grader's own source
    got = {(op, target) for op, target, line, via in ops(a)}
    assert got == {("connect", "10.0.0.1:80"), ("read", "/etc/passwd"), ("write", "/home/other/out.json"),
                   ("list", "/home"), ("subprocess", "sleep 100"), ("ctypes", "libc.so.6"),
                   ("read", os.path.realpath(audit_mod.__file__))}
    assert {line for _, _, line, _ in ops(a)} == {2}
    assert {via for _, _, _, via in ops(a)} == {"your code"}


def test_what_a_student_may_touch_is_not_recorded(tmp_path):
    a = make(tmp_path)
    student_calls(a, "open", (str(tmp_path / "notes.txt"), "w", os.O_WRONLY))   # its own folder
    student_calls(a, "open", (os.__file__, "r", os.O_RDONLY))                   # the Python installation
    student_calls(a, "open", ("/dev/null", "w", os.O_WRONLY))
    student_calls(a, "os.listdir", (str(tmp_path),))
    student_calls(a, "open", (3, "r", 0))                                        # a descriptor, not a path
    assert ops(a) == []


def test_a_library_is_held_to_what_libraries_do(tmp_path):
    a = make(tmp_path)
    for ev, args in [("open", ("/proc/cpuinfo", "r", 0)), ("open", ("/usr/share/fonts/x.ttf", "rb", 0)),
                     ("os.listdir", ("/usr/lib",))]:
        student_calls(a, ev, args, via_library=True)
    # torch's own: its compiler's processes and native code, its reading of source files it traces
    for ev, args in [("subprocess.Popen", ("g++", ["g++", "-O2"], None, None)), ("ctypes.dlopen", ("libgomp.so",)),
                     ("open", (audit_mod.__file__, "r", 0))]:
        student_calls(a, ev, args, via_library=True, library=TORCH)
    assert ops(a) == []
    for ev, args in [("socket.connect", (None, ("1.1.1.1", 53))), ("open", ("/home/x/secret.pt", "rb", 0)),
                     ("open", ("/home/x/out.pt", "wb", os.O_WRONLY))]:
        student_calls(a, ev, args, via_library=True)
    assert [(op, line, via) for op, _, line, via in ops(a)] == [
        ("connect", 2, "a library called by your code"), ("read", 2, "a library called by your code"),
        ("write", 2, "a library called by your code")]


def test_any_other_library_is_reported_for_what_it_does_on_the_students_behalf(tmp_path):
    """numpy.loadtxt of the reference, torch.utils.collect_env.run, a library loading native code: reported
    whoever makes the call, as long as the student's code is on the stack."""
    a = make(tmp_path)
    for ev, args in [("subprocess.Popen", ("/bin/sh", ["/bin/sh", "-c", "id"], None, None)),
                     ("ctypes.dlopen", ("libevil.so",)), ("open", (audit_mod.__file__, "r", 0))]:
        student_calls(a, ev, args, via_library=True)
    assert {(op, via) for op, _, _, via in ops(a)} == {("subprocess", "a library called by your code"),
                                                       ("ctypes", "a library called by your code"),
                                                       ("read", "a library called by your code")}


def test_frame_introspection_by_the_student_is_recorded_and_told_at_once(tmp_path):
    a = make(tmp_path)
    told = []
    a.notify = told.append
    frame = types.SimpleNamespace()
    student_calls(a, "sys._getframe", (frame,))
    student_calls(a, "object.__getattr__", (frame, "tb_frame"))
    student_calls(a, "object.__getattr__", (frame, "f_code"))        # not a way to another frame
    student_calls(a, "sys._getframe", (frame,), via_library=True)   # a library's own use (warnings, typing)
    assert {(op, target) for op, target, _, _ in ops(a)} == {("introspection", "sys._getframe"),
                                                             ("introspection", "tb_frame")}
    assert len(told) == 2 and all("line 2" in t for t in told), told


def test_the_harness_own_operations_are_never_recorded(tmp_path):
    a = make(tmp_path)
    a.hook("open", ("/etc/passwd", "r", 0))           # no student frame on the stack
    a.hook("socket.connect", (None, ("1.1.1.1", 53)))
    a.hook("import", ("torch", None, None, None, None))  # not an audited event
    assert ops(a) == []


def test_records_are_bounded_and_repeats_counted(tmp_path):
    a = make(tmp_path)
    for _ in range(5):
        student_calls(a, "open", ("/etc/passwd", "r", 0))
    for i in range(audit_mod.MAX_RECORDS + 20):
        student_calls(a, "open", (f"/home/f{i}", "r", 0))
    recs = a.attempts()
    assert len(recs) == audit_mod.MAX_PER_KIND
    assert a.dropped == audit_mod.MAX_RECORDS + 20 - (audit_mod.MAX_PER_KIND - 1)
    assert next(r for r in recs if r["target"] == "/etc/passwd")["count"] == 5
    assert a.counts == {"read": 5 + audit_mod.MAX_RECORDS + 20}
    for kind in range(20):      # many kinds: the total cap holds, but never against a kind's first record
        for i in range(audit_mod.MAX_PER_KIND):
            a.add_finding(f"kind{kind}", f"t{i}", 3)
    assert {r["op"] for r in a.attempts()} == {"read"} | {f"kind{k}" for k in range(20)}
    assert audit_mod.MAX_RECORDS <= len(a.records) <= audit_mod.MAX_RECORDS + 20     # beyond: firsts only


def test_decoys_of_one_kind_never_push_another_kind_out(tmp_path):
    """60 listings of distinct folders, then a shell, a read of the grader's file and a connect: every kind is
    kept (its first record) and counted."""
    a = make(tmp_path)
    for i in range(60):
        student_calls(a, "os.listdir", (f"/home/decoy{i}",))
    student_calls(a, "os.system", ("id",))
    student_calls(a, "open", (audit_mod.__file__, "r", 0))
    student_calls(a, "socket.connect", (None, ("10.0.0.1", 80)))
    recs = a.attempts()
    assert {r["op"] for r in recs} == {"list", "os.system", "read", "connect"}
    assert a.counts == {"list": 60, "os.system": 1, "read": 1, "connect": 1}
    assert sum(r["op"] == "list" for r in recs) == audit_mod.MAX_PER_KIND


def test_blocked_is_decided_from_what_the_process_can_see(tmp_path):
    a = make(tmp_path, isolation="bwrap")
    student_calls(a, "open", ("/no/such/dir/secret", "r", 0))
    student_calls(a, "socket.connect", (None, ("1.1.1.1", 53)))
    student_calls(a, "os.system", ("true",))
    blocked = {r["op"]: r["blocked"] for r in a.attempts()}
    assert blocked == {"read": True, "connect": True, "os.system": False}


def test_a_hook_that_fails_never_breaks_the_operation(tmp_path):
    a = make(tmp_path)
    student_calls(a, "open", (types.SimpleNamespace(), "r", 0))     # a path that cannot be decoded
    student_calls(a, "socket.connect", ())                           # malformed arguments
    assert isinstance(a.attempts(), list)


def test_a_descriptors_signal_owner_is_recorded_with_the_pid_it_names(tmp_path):
    """fcntl F_SETOWN / ioctl FIOSETOWN make the kernel signal another process at the descriptor's next I/O
    (confine.py refuses them); the record says which call and which pid, the ioctl's packed int decoded.
    Other fcntl/ioctl requests (F_GETFL, a terminal's size) are nobody's business."""
    import struct
    a = make(tmp_path)
    student_calls(a, "fcntl.fcntl", (5, 8, 2))                                  # F_SETOWN, pid 2
    student_calls(a, "fcntl.ioctl", (6, 0x8901, struct.pack("i", 7)))          # FIOSETOWN, pid 7
    student_calls(a, "fcntl.fcntl", (5, 3, 0))                                  # F_GETFL
    student_calls(a, "fcntl.ioctl", (1, 0x5413, b"\0" * 8))                    # TIOCGWINSZ
    assert {(op, target) for op, target, _, _ in ops(a)} == {("signal-owner", "F_SETOWN 2"),
                                                           ("signal-owner", "FIOSETOWN 7")}


def test_operations_from_threads_the_student_started_are_the_students(tmp_path):
    """A thread started by the student's code with a function of no frame of its own (os.listdir, os.system
    through an executor, a raw _thread): its operations count, at the line that started the thread; a thread
    the harness starts does not."""
    import _thread
    import threading
    from harness.child import threads
    a = make(tmp_path)
    saved = (_thread.start_new_thread, _thread.start_new, threading._start_new_thread)
    threads.watch_threads(a)
    hook = a.hook
    try:
        go = _fn("def go(os, threading, cf, done):\n"
                 "    t = threading.Thread(target=os.listdir, args=('/home',)); t.start(); t.join()\n"
                 "    cf.ThreadPoolExecutor(1).submit(os.listdir, '/root').result()\n",
                 STUDENT, "go")
        import concurrent.futures as cf
        real = os.listdir
        fake = types.SimpleNamespace(listdir=lambda p: hook("os.listdir", (p,)))
        go(fake, threading, cf, None)
        t = threading.Thread(target=fake.listdir, args=("/var",))          # the harness's own thread
        t.start(), t.join()
        assert real is os.listdir
    finally:
        _thread.start_new_thread, _thread.start_new, threading._start_new_thread = saved
    assert {(op, target, line) for op, target, line, _ in ops(a)} == {("list", "/home", 2), ("list", "/root", 3)}


def test_trace_hooks_and_code_under_another_name_are_introspection(tmp_path):
    a = make(tmp_path)
    told = []
    a.notify = told.append
    student_calls(a, "sys.settrace", ())
    student_calls(a, "code.__new__", (b"", "/grader/harness/child/main.py", "f", 0, 0, 0, 0, 0, 0))
    student_calls(a, "code.__new__", (b"", STUDENT, "f", 0, 0, 0, 0, 0, 0))             # its own file: fine
    student_calls(a, "sys.setprofile", (), via_library=True)                            # a library's own
    assert {target for op, target, _, _ in ops(a)} == {"sys.settrace",
                                                      "a code object named /grader/harness/child/main.py"}
    assert len(told) == 2
