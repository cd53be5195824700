"""The parent side: run one submission in a child process and get plain data back.

The child gets a fresh temporary folder holding only a copy of the submission
(also its HOME and TMPDIR), a scrubbed environment, resource limits (address
space, CPU time, file size, open files, processes for a non-root grader, no
core dumps), its own session, and - where bubblewrap works - its own user,
pid, network and mount namespaces (see sandbox.py). When it ends or runs out
of time, every process it started is found and killed (sandbox.kill_tree),
including ones that left its session or double-forked.

Its result arrives as JSON lines on a private pipe that the child moves to a
high descriptor before any student code runs. Every line carries the run's
key (sent to the child on stdin, never on the command line or in the
environment) and a sequence number; the result is the last line, and it counts
only if the child then exits with status 0. A line without the key (a forged
or garbage write to the pipe), a message out of order, or a pipe closed by the
submission is recorded as tampering (check `result-channel`), never as a
result. stdout and stderr are drained in threads and kept only up to a bound
(result_pipe.py reads the pipes). The parent also scans the submission's
text for code that reaches into the grader's process (scan.scan_source;
check `tamper-static`).
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from .readable import cut
from . import assignments, paths
from .isolation import held, sandbox, split, warm_split
from .isolation.enforce import RunLimits
from .outcome import ChildOutcome
from .protocol import ASSIGNMENTS, EXIT_CHANNEL, EXIT_MEMORY, PARENT_CHECKS, CheckSpec, Limits, wire_argv
from .isolation.pack_copy import copy_folder
from .isolation.result_pipe import MAX_OUTPUT_BYTES, MAX_RESULT_BYTES, Drain, ResultChannel, flood_detail, output_flood
from .isolation.cgroup import joiner
from .isolation.scratch import apply_rlimits, ask_for_stack, nproc_limit, rlimits
from .isolation.scratch import env as _env
from .isolation.scratch import rmtree as _rmtree
from .isolation.support_files import SupportError
from .isolation.support_files import copy_into as copy_support


def _limits(lim: Limits, nproc: int | None, device: str = "cpu", cgroup_procs: str | None = None):
    values, join = rlimits(lim, nproc, device), joiner(cgroup_procs)

    def apply():
        os.setsid()
        join()                 # the run's cgroup (enforce.py), where the machine delegates one, before exec
        apply_rlimits(values)
    return apply


def run_child(submission: str | Path, *, assignment: str = "auto", seed: int = 0, device: str = "cpu",
              quick: bool = False, limits: Limits | None = None, on_event=None,
              isolate: str = "auto", display: str | None = None, acquire=None) -> ChildOutcome:
    """run_spec with the request spelled out as keywords."""
    spec = CheckSpec(str(submission), assignment=assignment, seed=seed, device=device, quick=quick,
                     isolate=isolate, display=display or "", limits=limits or Limits())
    return run_spec(spec, on_event=on_event, acquire=acquire)


def run_spec(spec: CheckSpec, *, on_event=None, acquire=None, early=None) -> ChildOutcome:
    """Run the probes on `spec.path` in a limited child process; never raises for student faults.

    With limits.warm (grade, selftest, watch, the check daemon; CPU only) the child is a fork of a warm
    worker (warm.py): the same harness.child.main, limits and channel, without a new sandbox and torch import per
    submission. `acquire(isolation, threads)` gets that worker instead of warm.acquire (the daemon starts its
    workers from one long-lived thread). `spec.display`: the name the result shows, when `spec.path` is a
    path rewritten for this process (the daemon gets absolute paths); the child gets `spec.for_child`.
    `early`: a fork already started for this run (early.py: a repair's first re-check), told its run here."""
    lim, device, assignment = spec.limits, spec.device, spec.assignment
    submission, shown = Path(spec.path), spec.shown()
    t0 = time.monotonic() if early is None else early.t0
    try:
        isolation = sandbox.mode(spec.isolate)
    except RuntimeError as e:
        return ChildOutcome(None, "grader-fault", str(e), seconds=time.monotonic() - t0)
    if early is not None and (submission.is_dir() or submission.suffix != ".py" or
                              not early.fits(spec.for_child(early.path, isolation))):
        early.cancel()          # started for another run: this one starts as usual
        return run_spec(spec, on_event=on_event, acquire=acquire)
    worker = early.worker if early is not None else None
    # a pack's folder or a split pack's file: the student's code in a model server, the probes in a prober
    # (isolation/split.py); warm, both forked by the slot's two workers (isolation/warm_split.py)
    if (found := split.assignment_of_file(submission, assignment)) != assignment:    # a split pack's file, as auto
        spec, assignment = replace(spec, assignment=found), found
    two = split.wanted(assignments.pack_of(assignment), submission) and (device == "cpu" or submission.is_dir())
    if worker is None and lim.warm and device == "cpu" and (not two or warm_split.wanted()):
        from .isolation import warm
        try:
            worker = acquire(isolation, lim.threads) if acquire else \
                warm.acquire(isolation, lim.threads, beside=warm_split.beside if two else None)
        except warm.Stopped:
            return ChildOutcome(None, "grader-fault", "the batch stopped before this check ran",
                                seconds=time.monotonic() - t0, isolation=isolation)
    work = early.work if early is not None else worker.new_run_dir() if worker else \
        Path(tempfile.mkdtemp(prefix="mtxdiag-"))
    nonce, token = early.nonce if early is not None else secrets.token_hex(16), secrets.token_hex(12)
    chan = ResultChannel(nonce, t0, on_event)
    run, guard = None, RunLimits(lim, device)
    try:
        left_out: list = []
        if submission.is_dir():            # an `lm` repository or a pack's folder: its .py files (pack_copy)
            name = "repo"
            static = copy_folder(assignment, submission, work / name, _static_findings, shown, left_out)
        else:
            name = "submission" + (".ipynb" if submission.suffix == ".ipynb" else ".py")
            shutil.copyfile(submission, work / name)
            static = _static_findings(work / name, shown)
        if spec.support:                   # the instructor's extra files, beside the copy (gradescope build --files)
            try:
                copy_support(spec.support, work)
            except (SupportError, OSError) as e:
                return ChildOutcome(None, "grader-fault", f"could not copy the extra files: {e}",
                                    seconds=time.monotonic() - t0, isolation=isolation)
        allowed = paths.submission_files(work / name, shown)     # the only files a location may name
        args = spec.for_child(str(work / name), isolation).to_argv()
        if worker is not None:
            try:
                if two:
                    run, r, out_fd, err_fd = warm_split.launch(worker, args, work, nonce, rlimits(lim, nproc_limit(lim)))
                else:
                    run, r, out_fd, err_fd = early.go(spec.for_child(str(work / name), isolation)) if early else \
                        warm.launch_run(worker, args, work, nonce, rlimits(lim, nproc_limit(lim)))[:4]
            except Exception:       # it could not take the run: retired, and this submission runs cold
                worker.retire()
                stopped, worker = worker.stopped, None
                if stopped:
                    return ChildOutcome(None, "grader-fault", "the batch stopped before this check ran",
                                        seconds=time.monotonic() - t0, isolation=isolation)
                return run_spec(replace(spec, limits=replace(lim, warm=False)), on_event=on_event)
        elif two:
            run, r, out_fd, err_fd = split.launch(args, work, nonce, token, lim, isolation, device, _limits(
                lim, nproc_limit(lim), device, guard.join_path()), _ColdRun)
        else:
            run, r, out_fd, err_fd = _launch_cold(args, work, nonce, token, lim, isolation, device, guard.join_path())
        res = Drain(r, MAX_RESULT_BYTES, chan.on_line, chan.on_end)
        out = Drain(out_fd, MAX_OUTPUT_BYTES)
        err = Drain(err_fd, MAX_OUTPUT_BYTES)
        srv = Drain(run.output, MAX_OUTPUT_BYTES) if getattr(run, "output", None) is not None else None   # split
        drains = [d for d in (res, out, err, srv) if d is not None]
        for d in drains:
            d.start()
        stack = ""
        guard.adopt(run.members())   # a warm fork joins the run's cgroup (a cold child joined before exec)
        # memory where no cgroup charges it, and disk always (the folder the run can write, files held unlinked)
        watch = guard.watch(run.watched, work if worker is None else [worker.slot] + (
            [worker.server.home] if two and worker.server is not None else []))
        finished = guard.settle(run.wait(t0 + lim.timeout_s, watch), watch)
        if finished in ("memory", "disk"):
            run.end()    # a warm worker's fork ended alone: the worker, cleaned up, takes the next run
        if not finished:
            stack = run.stop()
        run.kill()       # everything the run started dies with it (a warm worker: or retires)
        for d in drains:
            d.join(timeout=5)
        breach = [f"the run changed its warm worker (which was retired): {p}" for p in getattr(run, "poisoned", [])]
        outcome = _outcome(run.returncode, chan, out, err, stack, finished, watch, static, shown, assignment,
                           isolation, device, lim, time.monotonic() - t0, breach, allowed, srv)
        outcome.limits = guard.info()
        return with_files_note(outcome, left_out)
    except OSError as e:
        return ChildOutcome(None, "grader-fault", f"could not start the child process: {e}",
                            seconds=time.monotonic() - t0, isolation=isolation)
    finally:
        guard.close()
        if early is not None and not early.used:      # an exception before its run was sent: the fork goes
            early.cancel()                            # (and its worker back to the pool)
            worker = None
        if run is not None and run.returncode is None:   # an exception above: never leave a run behind
            run.kill()
        if worker is not None:
            if run is None:            # nothing ran: its folder goes now (after a run the worker empties the slot)
                _rmtree(work)
            from .isolation import warm
            warm.release(worker)
        else:
            _rmtree(work)


def _launch_cold(args, work: Path, nonce: str, token: str, lim: Limits, isolation: str, device: str,
                 cgroup_procs: str | None = None):
    """A new sandboxed interpreter for this run: (handle, result fd, stdout fd, stderr fd)."""
    r, w = os.pipe()
    key_r, key_w = os.pipe()
    os.write(key_w, (nonce + "\n").encode())
    os.close(key_w)
    cmd = sandbox.command([sys.executable, "-m", "harness.child.main"] + args + wire_argv(w), work=work,
                          isolate=isolation, pass_fd=w, device=device)
    try:
        proc = subprocess.Popen(cmd, cwd=work, env=_env(lim.threads, work, isolation, token), stdin=key_r,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(w,),
                                preexec_fn=_limits(lim, nproc_limit(lim), device, cgroup_procs), close_fds=True)
    except BaseException:
        os.close(r)
        raise
    finally:
        os.close(w), os.close(key_r)
    out, err = os.dup(proc.stdout.fileno()), os.dup(proc.stderr.fileno())
    proc.stdout.close(), proc.stderr.close()
    return _ColdRun(proc, token, work, isolation), r, out, err


class _ColdRun:
    """A cold child: a Popen in its own sandbox, waited for without reaping until its tree is killed."""

    def __init__(self, proc, token: str, work: Path, isolation: str):
        self.proc, self.token, self.work, self.isolation = proc, token, work, isolation

    def members(self):
        return sandbox.members(self.proc.pid, self.token, self.proc.pid)

    def watched(self):
        """members(), cheaper inside bubblewrap (its pid namespace keeps orphans below the root)."""
        below = held.descendants(self.proc.pid) if self.isolation == "bwrap" else None
        return below if below is not None else self.members()

    def wait(self, deadline: float, watch=None):
        return _wait(self.proc, deadline, watch)

    def end(self):
        """Past a limit: the caller kills the whole tree (kill)."""

    def stop(self) -> str:
        return _stop(self.proc, self.work, self.isolation)

    def kill(self):
        # descendants, its session, carriers of its token; then its process group (pid not reaped yet)
        sandbox.kill_tree(self.proc.pid, self.token, self.proc.pid)
        _killpg(self.proc.pid)
        _reap(self.proc)

    @property
    def returncode(self):
        return _signal_rc(self.proc.returncode, self.isolation)


def _outcome(rc, chan, out, err, stack, finished, watch, static, submission, assignment, isolation,
             device, lim, seconds, breach=(), allowed: frozenset | None = None, server=None) -> ChildOutcome:
    """What the run's channel, exit status and output say, with what only the parent sees.

    `breach`: what the run did to the processes around it (its warm worker); with what the child reported
    live on the channel (frame or heap introspection, as it happened) and locations naming files other than
    the submission's copy, it is the parent's check `isolation` (tampering). `server`: a split run's model server's
    output (Drain), the student's code's, counted with the rest (output_flood)."""
    breach = list(breach) + [f"live report from the check: {w}" for w in chan.live]
    if chan.result is not None and allowed is not None:
        breach += paths.confine_locations(chan.result, allowed)
    integrity = chan.problems()
    if rc == EXIT_CHANNEL:
        integrity.append("the submission closed or replaced the grader's private result channel")
    flood = output_flood(out, err, chan.result, lim.output_mb, server)
    common = dict(returncode=rc, seconds=seconds, phase=chan.phase, stderr=err.text(),
                  stdout=out.text() + (server.text() if server is not None else ""),    # the student's, split
                  stack=stack, phases=chan.phases, isolation=isolation,
                  integrity=integrity + [f"line {f['line']}: {f['what']}" for f in static])
    where = f" (while running '{chan.phase}')" if chan.phase else ""
    breach += [chan.oversize_reason()] if chan.oversized and (integrity or breach) else []
    common["integrity"] += breach
    if integrity or breach:
        payload = chan.result if (chan.done and not chan.broken and rc == 0 and isinstance(chan.result, dict)) \
            else _empty_payload(assignment)
        return ChildOutcome(_with_parent_checks(payload, integrity, static, str(submission), flood, breach), "ok",
                            "tampering with the result channel" if integrity else "breach of the run's isolation",
                            **common)
    if chan.oversized:
        return ChildOutcome(None, "crashed", chan.oversize_reason() + where, **common)
    if not chan.phases and not (chan.done and rc == 0):
        return _before_load(rc, finished, common, isolation, lim)
    if finished in ("disk", "memory"):         # a watch from outside, or the run's cgroup (enforce.py)
        return ChildOutcome(None, "crashed" if finished == "disk" else "memory",
                            (watch.fired.reason(device) if finished == "memory" else watch.fired.reason()) + where,
                            **common)
    if not finished:
        return ChildOutcome(None, "timeout", f"did not finish within {lim.timeout_s:.0f} s{where}", **common)
    if rc == EXIT_MEMORY:
        return ChildOutcome(None, "memory", f"ran out of memory (limit {lim.memory_mb} MB){where}", **common)
    if chan.done and rc == 0 and isinstance(chan.result, dict):
        return ChildOutcome(_with_parent_checks(chan.result, [], static, str(submission), flood), "ok", **common)
    status, reason = _why_died(rc, common["stderr"], lim)
    return ChildOutcome(None, status, reason + where, **common)


def _before_load(rc, finished, common: dict, isolation: str, lim: Limits) -> ChildOutcome:
    """The run ended before the child announced the 'load' phase: no line of the submission had run, so
    whatever ended it (the sandbox, the checker's own start-up, the machine) is not the student's doing."""
    err = common["stderr"].strip()
    if isolation == "bwrap" and "bwrap:" in err:
        return ChildOutcome(None, "grader-fault", "the sandbox (bubblewrap) could not start: " + err[-300:], **common)
    why = f"did not reach the submission within {lim.timeout_s:.0f} s" if not finished else \
        _why_died(rc, err, lim)[1].split(" before sending")[0].split(" (e.g.")[0]
    last = err.splitlines()[-1][:300] if err else ""
    return ChildOutcome(None, "grader-fault", f"the checker {why} before any of the submission's code ran"
                        + (f": {last}" if last else ""), **common)


def _wait(proc, deadline: float, watch=None) -> bool | str:
    """Wait for the child to exit without reaping it (its pid stays reserved until the tree is killed).

    True: it exited; False: out of time; "memory" or "disk": that watchdog (diskwatch.Watches) saw it over."""
    while True:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:
            return True
        now = time.monotonic()
        if now >= deadline:
            return False
        if watch is not None and watch.over() is not None:
            return watch.kind
        time.sleep(min(0.05, deadline - now))


def _killpg(pgid: int):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(proc):
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _signal_rc(rc, isolation):
    """bwrap reports a child killed by signal N as exit status 128+N; use subprocess's -N convention."""
    if isolation == "bwrap" and rc is not None and 128 < rc < 128 + 65:
        return -(rc - 128)
    return rc


def _stop(proc, work: Path, isolation: str) -> str:
    """Ask the child for its Python stack; the caller then kills the tree."""
    return ask_for_stack(sandbox.find_child(proc.pid) if isolation == "bwrap" else proc.pid, work)


def _static_findings(copy: Path, display: str) -> list[dict]:
    """scan.scan_source on the submission's text, with locations; a file too big to parse (or a notebook
    too big to decode) is read in chunks by scan.scan_file instead: every byte is read, whatever the size."""
    from . import scan
    from . import source
    try:
        size = copy.stat().st_size
        if size > scan.MAX_AST_CHARS:
            return scan.scan_file(copy, lines=copy.suffix != ".ipynb")
        src = source.read_source(display, copy.read_bytes())
        found = scan.scan_source(src.text)
        for f in found:
            f["location"] = src.where(f["line"]) if f.get("line") else None
        return found
    except source.SubmissionError:
        return []            # not text, or not a notebook: it will not load either
    except Exception:
        try:
            return scan.scan_file(copy, lines=False)
        except Exception:
            return []


def _empty_payload(assignment: str) -> dict:
    return {"checks": [], "load": {"ok": True}, "skipped_code": [], "artifacts": {}, "stdout": "", "timings": {},
            "assignment": assignment if assignment in ASSIGNMENTS else None}


def _with_parent_checks(payload: dict, channel: list, static: list, display: str, flood: dict | None = None,
                        breach: list | None = None) -> dict:
    """The child's payload plus what only the parent can see, first (a rule reads the first check of an id)."""
    payload = dict(payload)
    checks = payload.get("checks") if isinstance(payload.get("checks"), list) else []
    checks = [c for c in checks if not (isinstance(c, dict) and c.get("id") in PARENT_CHECKS)]
    mine = []
    if channel:
        mine.append({"id": "result-channel", "status": "fail", "measured": {"problems": channel},
                     "expected": "only the grader writes to its private result channel",
                     "detail": "; ".join(channel), "data": {"problems": channel, "source": "parent"},
                     "location": None})
    if static:
        lines = [f"line {(f.get('location') or {}).get('cell_line') or f['line']}: {f['what']}"
                 if f.get("line") else f["what"] for f in static]
        mine.append({"id": "tamper-static", "status": "fail", "measured": [f["what"] for f in static],
                     "expected": "no code that reaches into the grader's process or patches torch",
                     "detail": cut("; ".join(lines), 1500), "data": {"findings": static, "source": "parent"},
                     "location": next((f["location"] for f in static if f.get("location")), None)})
    if breach:
        mine.append({"id": "isolation", "status": "fail", "measured": {"problems": breach[:40]},
                     "expected": "a run changes nothing outside itself and reaches nothing of the grader",
                     "detail": cut("; ".join(breach), 1900), "data": {"problems": breach[:100], "source": "parent"},
                     "location": None})
    if flood:
        mine.append({"id": "output-flood", "status": "fail", "measured": flood["bytes"],
                     "expected": f"at most {flood['limit_mb']:g} MB of output", "detail": flood_detail(flood),
                     "data": dict(flood, source="parent"), "location": None})
    payload["checks"] = mine + checks
    return payload


def with_files_note(outcome: ChildOutcome, left_out: list) -> ChildOutcome:
    """What the copy of a repository left out (repo_copy.select), as an info check the parent writes."""
    if left_out and isinstance(outcome.payload, dict):
        outcome.payload = dict(outcome.payload)
        outcome.payload["checks"] = [files_check(left_out)] + list(outcome.payload.get("checks") or [])
    return outcome


def files_check(left_out: list) -> dict:
    return {"id": "submission-files", "status": "info", "measured": {"left_out": left_out[:20]},
            "expected": "every file of the submission read", "detail": cut("; ".join(left_out), 1500),
            "data": {"left_out": left_out[:20], "source": "parent"}, "location": None}


def _why_died(rc, stderr: str, lim: Limits):
    if rc is not None and rc < 0:
        sig = -rc
        if sig == signal.SIGKILL:
            return "memory", f"was killed (SIGKILL); most likely it exceeded the memory limit of {lim.memory_mb} MB"
        if sig == signal.SIGXCPU:
            return "timeout", "exceeded its CPU-time limit"
        if sig == signal.SIGXFSZ:
            return "crashed", f"wrote a file larger than {lim.file_mb} MB"
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return "crashed", f"was killed by signal {name}"
    if "MemoryError" in stderr or "std::bad_alloc" in stderr or "DefaultCPUAllocator: can't allocate" in stderr:
        return "memory", f"ran out of memory (limit {lim.memory_mb} MB)"
    return "no-result", f"exited with status {rc} before sending a result (e.g. sys.exit or os._exit in the code)"
