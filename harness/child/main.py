"""The child process: load the student's file, run the probes, send plain data home.

Untrusted code runs only here (a split pack's: in the model server, child/pack_remote.py, file_remote.py). What
goes back to the parent is JSON on a private pipe, not stdout: a student's print() cannot reach it. Before any student code
runs, the child

* reads the run's key from stdin (then stdin is empty), moves the pipe to a random high descriptor that is
  closed on exec, and signs every message with the key and a sequence number (the parent rejects the rest);
  a deferred run (early.py: a repair's first re-check) reads it after capture.capture, with its LATE limits;
* puts its parent out of the submission's reach (confine.py), becomes the subreaper of its descendants;
* records the identity of every torch, builtins and harness function the probes rely on (capture.capture);
  after loading, after every call into student code and after every probe, whatever the submission replaced
  is put back and named in a failing check `tamper`;
* rejects model outputs that cannot be measured honestly (a Tensor subclass, another device, a non-float dtype).

The parent validates everything it receives; see runner.py for what it does with a forged or broken channel.
"""
from __future__ import annotations

import io
import json
import os
import sys
import time
import traceback
from dataclasses import replace

from ..readable import cut
from .. import assignments
from .integrity import add_integrity, guarded_context, tamper_check
from ..protocol import (EXIT_CHANNEL, EXIT_MEMORY, MAX_LATE_BYTES, MSG_INTEGRITY, MSG_PHASE, MSG_RESULT, SERVER_FD_VAR,
                       late_limits, parse_argv)

_exit, _write, _fstat = os._exit, os.write, os.fstat   # taken before any student code can replace them


class BoundedIO(io.TextIOBase):
    """sys.stdout/stderr for student code: keeps the first `limit` characters, counts the rest."""

    def __init__(self, limit=200_000):
        self.parts, self.size, self.limit, self.dropped = [], 0, limit, 0

    def write(self, s):
        s = str(s)
        room = self.limit - self.size
        if room > 0:
            self.parts.append(s[:room])
            self.size += min(len(s), room)
        self.dropped += max(0, len(s) - max(room, 0))
        return len(s)

    def getvalue(self):
        tail = f"\n[... {self.dropped:,} more characters not kept]" if self.dropped else ""
        return "".join(self.parts) + tail


class _Channel:
    """The private result pipe: moved out of the way of blind writes, every message keyed and numbered."""

    def __init__(self, fd: int, nonce: str):
        import random
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        hi = max(64, min(soft if soft > 0 else 1024, 4096) - 1)
        rng = random.SystemRandom()
        target = fd
        for _ in range(100):
            cand = rng.randint(max(32, hi // 2), hi)
            try:
                os.fstat(cand)          # taken: try another
            except OSError:
                target = cand
                break
        if target != fd:
            os.dup2(fd, target, inheritable=False)
            os.close(fd)
        else:
            os.set_inheritable(fd, False)
        self.fd, self.nonce, self.seq = target, nonce, 0
        st = os.fstat(self.fd)
        self.ident = (st.st_dev, st.st_ino)
        self._dumps = json.dumps

    def send(self, obj):
        try:
            st = _fstat(self.fd)
            if (st.st_dev, st.st_ino) != self.ident:
                raise OSError("replaced")
            msg = dict(obj)
            msg["seq"], msg["nonce"] = self.seq, self.nonce
            self.seq += 1
            data = (self._dumps(msg, default=_jsonable) + "\n").encode("utf-8", "replace")
            view = memoryview(data)
            while view:
                n = _write(self.fd, view[:65536])
                view = view[n:]
        except OSError:
            _die(EXIT_CHANNEL, "mtxdiag: the result channel was closed or replaced by the submission")


def _die(code: int, message: str):
    try:
        _write(2, (message + "\n").encode())
    except OSError:
        pass
    _exit(code)


def _empty_stdin() -> None:
    """fd 0 becomes a pipe with no writer: reading it gives end-of-file at once.

    Not /dev/null: on a machine where /dev/null was replaced by a regular file (seen in CI: it held what other
    processes had written to it, pytest's log lines among them) the student would read that file."""
    r, w = os.pipe()
    os.close(w)
    os.dup2(r, 0)
    os.close(r)


def _read_key(enabled: bool) -> str:
    """The run's key: one line on stdin from the parent; then stdin is empty (_empty_stdin)."""
    return _stdin_lines(1, 256)[0].decode("ascii", "replace").strip() if enabled else ""


def _stdin_lines(n: int, cap: int) -> list[bytes]:
    """The first `n` lines the parent wrote on stdin (at most `cap` bytes read; missing ones empty); then stdin
    is empty (_empty_stdin). A deferred run's: its key, then its LATE limits."""
    buf = b""
    while buf.count(b"\n") < n and len(buf) < cap:
        chunk = os.read(0, 4096)
        if not chunk:
            break
        buf += chunk
    _empty_stdin()
    return (buf.split(b"\n") + [b""] * n)[:n]


def _safe_str(x, n=500) -> str:
    """str() of something the student controls (an exception, its message), bounded in size and time."""
    import signal

    def on_alarm(signum, frame):
        raise TimeoutError
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        s = BaseException.__str__(x) if isinstance(x, BaseException) else str(x)
        return cut(s, n) if isinstance(s, str) else "<unprintable>"
    except BaseException:
        return "<unprintable>"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _type_name(x) -> str:
    try:
        return name if isinstance(name := type.__dict__["__name__"].__get__(type(x)), str) else "Exception"
    except Exception:
        return "Exception"


_MEMORY_TEXT = ("can't allocate memory", "defaultcpuallocator", "out of memory", "std::bad_alloc",
                "cannot allocate memory")


def _is_memory(exc) -> bool:
    if isinstance(exc, MemoryError):
        return True
    return isinstance(exc, RuntimeError) and any(t in _safe_str(exc, 2000).lower() for t in _MEMORY_TEXT)


def main(argv=None):
    a, result_fd, auth_stdin, deferred = parse_argv(sys.argv[1:] if argv is None else argv)   # protocol.CheckSpec
    lim = a.limits
    if not deferred:
        send = _Channel(result_fd, _read_key(auth_stdin)).send
    from ..isolation.confine import protect_surroundings
    protect_surroundings(bool(os.environ.get(SERVER_FD_VAR)))    # its parent out of reach of prlimit, renice, signals
    from ..isolation import sandbox
    sandbox.set_subreaper()
    # Neither the work folder nor '' on sys.path: a file the submission writes there must not shadow a module.
    here = os.path.realpath(os.getcwd())
    sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != here]
    if a.support:      # the instructor's extra files are there (gradescope build --files): a helper module imports,
        sys.path.append(here)      # last, so that nothing there shadows an installed module
    import faulthandler
    import signal
    # The parent sends SIGUSR1 before killing a child that ran too long: the stack names the stuck line.
    stack_file = open("stack.txt", "w")
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=False)

    t_start = time.perf_counter()
    import torch  # before student code: the probes hold references taken now
    t_torch = time.perf_counter()
    # torch imports this at the first optimizer step and wraps torch.manual_seed then: imported before the functions
    # are recorded, a cold child and a warm worker's fork (zygote.py) start from the same ones. A split run's prober
    if not os.environ.get(SERVER_FD_VAR):   # (no fork, no student code) leaves it to torch: 2.5-4.5 s (issue 45)
        import torch._dynamo  # noqa: F401
    # One thread unless asked: these models are small, and a shared machine punishes oversubscription 10x.
    torch.set_num_threads(lim.threads or 1)
    t_dynamo = time.perf_counter()
    from .calibrate import slowdown as _slowdown
    slowdown = lim.slowdown if lim.slowdown >= 1.0 else _slowdown()    # given: a repair's re-check
    t_cal = time.perf_counter()
    from . import side as child_side, loader
    from .capture import capture
    from .probes import select
    from .probes.base import Context, NotRun, ProbeTimeout, Skip, StudentError, check, seed_all
    # the child's fixed costs before the submission loads (bench/profile_check.py reads them)
    startup = {"torch_import_s": t_torch - t_start, "dynamo_import_s": t_dynamo - t_torch, "calibrate_s": t_cal - t_dynamo,
               "probe_imports_s": time.perf_counter() - t_cal}

    guard = capture()
    if deferred:        # a repair's re-check: started while the parent made its candidate, told its probes now
        key, late = _stdin_lines(2, 256 + MAX_LATE_BYTES)
        try:
            a = replace(a, limits=late_limits(late, a.limits))
        except ValueError:          # none (the parent gave the run up) or malformed: nothing to run
            _die(EXIT_CHANNEL, "mtxdiag: no run was sent to this deferred child")
        lim = a.limits
        send = _Channel(result_fd, key.decode("ascii", "replace").strip()).send
    from . import audit as audit_mod
    # Last before the student's file: what their code tries outside its lane is recorded from here on.
    audit = audit_mod.install(a.path, here, a.isolate)
    # introspection is told to the parent at once: a line already on the pipe cannot be taken back
    audit.notify = lambda what: send({"event": MSG_INTEGRITY, "what": what})
    guard.audit = audit     # a trace, profile or signal hook left behind is told the same way (hookwatch.py)
    from .hide import Hidden
    hidden = Hidden(guard._sysmods, audit.grader, is_student=audit.is_student, report=lambda name, line: guard._found(
        f"uses the grader's own code: imported {name} while the checks ran", None, line))
    GuardedContext = guarded_context(Context, StudentError, guard, hidden)
    captured = BoundedIO()
    real_out, real_err = sys.stdout, sys.stderr
    t0 = time.perf_counter()
    result = {"checks": [], "skipped_code": [], "artifacts": {}, "timings": dict(startup), "load": {"ok": False}}
    send({"event": MSG_PHASE, "name": "load"})
    from . import lm_loader, on_demand
    from .. import reached
    reach = reached.Reach(lim.coverage)     # which functions each probe ran: a repair's re-check reads it
    raw = None
    if not os.path.isdir(a.path):   # a folder is an `lm` repository or a pack's folder
        with open(a.path, "rb") as f:
            raw = f.read()
    sys.stdout = sys.stderr = captured
    seed_all(a.seed, "load")
    pack = assignments.folder_pack_of(a.assignment) if raw is None else None
    try:
        if os.environ.get(SERVER_FD_VAR):   # the student's code in the model server: a pack's folder, or file
            from . import file_remote, pack_remote
            source, module = (pack_remote if pack else file_remote).load(a.path, a.shown(), pack or assignments.pack_of(
                a.assignment), lim.load_timeout_s, int(os.environ[SERVER_FD_VAR]), result["timings"])
        elif pack is not None:
            from . import pack_loader
            source, module = pack_loader.load(a.path, a.shown(), pack, lim.load_timeout_s)
        elif lm_loader.wants(raw, a.assignment):
            source, module = lm_loader.load(a.path, a.shown(), raw, lim.load_timeout_s)
        else:
            source = loader.read_source(a.shown(), raw)
            source.run_path = a.path  # frames name the copy that runs; locations show the user's name
            guard.set_student(source.code_path, source.text)   # whose changes count: this file's
            with reach.during(reached.LOAD):
                module = loader.load(source, timeout_s=lim.load_timeout_s, compile_with=reach.compile)
    except loader.SubmissionError as e:
        sys.stdout, sys.stderr = real_out, real_err
        if any(t in str(e.message).lower() for t in _MEMORY_TEXT + ("memoryerror",)):
            _die(EXIT_MEMORY, f"mtxdiag: the submission ran out of memory while loading: {cut(e.message, 300)}")
        guard.reset_state()
        guard.check("loading your file")
        src = locals().get("source")
        result["load"] = {"ok": False, "kind": e.kind, "message": e.message, "line": e.line, "detail": e.detail,
                          "location": src.where(e.line) if (src and e.line) else None}
        result["skipped_code"] = src.skipped if src else []
        result["stdout"] = captured.getvalue()
        result["timings"]["load_s"] = result["timings"]["total_s"] = time.perf_counter() - t0
        if guard.findings:
            result["checks"].insert(0, tamper_check(check, guard, src))
        add_integrity(result, check, audit, guard, src, captured)
        send({"event": MSG_RESULT, "result": result})
        return _finish()
    finally:
        sys.stdout, sys.stderr = real_out, real_err
    guard.reset_state()
    guard.check("loading your file")
    guard.grader_use(module)
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=False)
    result["load"] = {"ok": True}
    result["skipped_code"] = source.skipped
    result["timings"]["load_s"] = time.perf_counter() - t0
    assignment = a.assignment
    if assignment == assignments.AUTO:
        assignment = assignments.detect(lambda name: name in vars(module))   # defined, not answered by a __getattr__
    result["assignment"] = assignment
    ctx = GuardedContext(module, source, assignment, a.seed, a.device, a.quick, slowdown=slowdown, reach=reach)
    result["timings"]["slowdown"] = round(slowdown, 2)
    contract_ok = True

    def run(probe) -> list:
        """One probe's checks; a student fault becomes an error check, never an exception."""
        audit.phase = f"the check '{probe.id}'"
        ctx.odd = None
        sys.stdout = sys.stderr = captured
        try:
            if not contract_ok:
                raise Skip("the required names are missing")
            seed_all(a.seed, probe.id)
            # a name their function needs from skipped top-level code: evaluated when safe, else a skip
            with reach.during(probe.id):
                checks = on_demand.run_probe(lambda: probe.fn(ctx), on_demand.namespace(module), source, Skip)
            if not isinstance(checks, list):
                raise TypeError(f"probe {probe.id} returned {type(checks).__name__}")
        except NotRun as e:     # left out by the run's options (--quick), not a model it could not measure
            checks = [check(probe.id, "skip", None, "", _safe_str(e), data={"not_run": True})]
        except Skip as e:
            checks = [check(probe.id, "skip", None, "", _safe_str(e))]
        except StudentError as e:
            if _is_memory(e.exc):
                _die(EXIT_MEMORY, f"mtxdiag: the submission ran out of memory in {e.where}: {_safe_str(e.exc, 300)}")
            name, msg = _type_name(e.exc), _safe_str(e.exc, 1000)
            checks = [check(probe.id, "error", {"exception": name, "message": cut(msg, 500)},
                            "runs without raising", f"{e.where} raised {name}: {cut(msg, 300)}",
                            data={"exception": name, "message": msg, "where": e.where,
                                  "timeout": isinstance(e.exc, ProbeTimeout)},
                            location=source.where(e.line) if e.line else None)]
        except BaseException as e:  # raised outside a student call: the student's fault if their code is on the stack
            if _is_memory(e):
                _die(EXIT_MEMORY, f"mtxdiag: the submission ran out of memory: {_safe_str(e, 300)}")
            line = loader.student_line(e.__traceback__, source.code_path)
            name, msg = _type_name(e), _safe_str(e, 1000)
            guard.check(probe.id)       # a probe that breaks after the submission changed torch: its doing
            if guard.findings and not ctx.odd:
                ctx.odd = "the check broke after your code changed functions it relies on (see the tamper check)"
            if line is not None or ctx.odd:
                why = f"; {ctx.odd}" if ctx.odd else ""
                where = f"your code, called by the check '{probe.id}'" if line is not None else \
                    f"the check '{probe.id}' on your model's output"
                checks = [check(probe.id, "error", {"exception": name, "message": cut(msg, 500)},
                                "runs without raising", f"{where} raised {name}: {cut(msg, 300)}{why}",
                                data={"exception": name, "message": (msg + why)[:1000], "where": where,
                                      "timeout": False},
                                location=source.where(line) if line else None)]
            else:   # the probe's own crash (e.g. on PyTorch's nested-tensor fast path): it could not measure
                checks = [check(probe.id, "skip", None, "", "could not measure: the check's own code failed (not "
                                "your code's fault): " + _safe_tb(e)[-600:],
                                data={"harness_error": True, "could_not_measure": f"{name}: {cut(msg, 300)}"})]
        finally:
            sys.stdout, sys.stderr = real_out, real_err
        guard.reset_state()
        guard.check(probe.id)
        return checks

    todo = select(assignment, a.quick, lim.only_probes, lim.extra_probes, module)
    gate = child_side.parse_gate(lim.gate)      # a repair's re-check: stop once a check it needs fails
    # what runs in a 2nd process (shared: a re-check's queue both draw from, this one once its own are done)
    beside, shared = child_side.plan(todo, a.side and not os.environ.get(SERVER_FD_VAR),   # split: one connection
                                     child_side.parse_costs(lim.costs), gate)
    side = None                 # that process (child_side.py), once started
    made = {}                   # probe id -> its checks

    def order():
        yield from ((p, False) for p in todo)
        yield from ((p, True) for p in child_side.drawn(side))
    for probe, drawn in order():
        if beside and side is None and contract_ok and probe.cost != "static":   # after the static checks
            side = child_side.start(beside, run, ctx, guard, audit, captured, _jsonable, gate, shared)
            beside = beside if side is not None else []         # could not fork: all of them run here
        if side is not None and probe in beside and not drawn:
            continue
        send({"event": MSG_PHASE, "name": probe.id})
        t = time.perf_counter()
        checks = run(probe)
        if probe.id == "contract" and checks and checks[0].get("status") == "fail":
            contract_ok = False
        made[probe.id] = checks
        result["timings"][probe.id] = round(time.perf_counter() - t, 3)
        if gate and (child_side.gate_fails(checks, gate, probe.id) or side is not None and child_side.pump(side)):
            result["timings"]["gated"] = 1      # the rest would not change the answer
            break
    if side is not None and result["timings"].get("gated") and not side.gated:
        child_side.abandon(side)                # this process stopped: the fork's answers are moot
    elif side is not None:
        for k, v in child_side.finish(side, result["timings"], guard, audit, captured, ctx, _die, EXIT_MEMORY,
                                      send).items():
            made.setdefault(k, v)       # a probe this process ran is its own, whatever the fork says
        if side.gated:
            result["timings"]["gated"] = 1      # the fork stopped (after this process had ended, perhaps)
    result["checks"].extend(c for p in todo for c in made.get(p.id, []))   # one process's order
    on_demand.mark(result["skipped_code"], result["checks"])
    guard.check("the end of the checks")
    if guard.findings:
        result["checks"].insert(0, tamper_check(check, guard, source))
    add_integrity(result, check, audit, guard, source, captured)
    result["artifacts"] = ctx.artifacts
    if reach.on:
        result["coverage"] = reach.record()
    result["stdout"] = captured.getvalue()
    result["timings"]["total_s"] = time.perf_counter() - t0
    send({"event": MSG_RESULT, "result": result})
    return _finish()


def _finish() -> int:
    """After the result: kill whatever the submission started (this process is their subreaper)."""
    try:
        from ..isolation import sandbox
        sandbox.kill_descendants()
    except Exception:
        pass
    return 0


def _safe_tb(e) -> str:
    try:
        return "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=3))
    except BaseException:
        return _type_name(e)


def _jsonable(o):
    try:
        import torch
        if type(o) is torch.Tensor:
            return o.tolist() if o.numel() < 10000 else f"<tensor {list(o.shape)}>"
    except Exception:
        pass
    if isinstance(o, float):
        return None
    return _safe_str(o, 200) if not isinstance(o, BaseException) else _type_name(o)


def entry(argv=None) -> int:
    """main() as a process runs it: its exit status, whatever the submission raised or called."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.__stdout__.flush()
    except Exception:
        pass
    return code


if __name__ == "__main__":
    _exit(entry())  # skip interpreter teardown: a student's atexit or __del__ must not run after the result
