"""The training probes in a second process beside the others: a check costs about the longer of the two.

On a machine with a spare core the child forks once, after the static checks (before the first probe
that is not static). The fork runs only the probes marked `side` (the ones that train: train-trace,
overfit, brief-training; lm's AdamW and schedule), in their order, in the state the static checks left; the
first process skips them and goes on with the rest. What the others leave in ctx.cache the side probes do
not read, except lm's lines of components that pass, which only move a location off such a component's
function (an optimizer's or a schedule's wrong op is in its own); the result is what one process gives
(tests/integration/test_child_side.py compares them on the lesson, mutants and lm). Both are the same sandboxed child (same limits, same scratch folder):
nothing the student's code does in one reaches the other except through this module's pipe.

What comes back is JSON on a pipe only the two share, keyed as the result channel is: the side probes' checks and timings, the
artifacts they made, what the tamper guard and the audit hook recorded meanwhile, and the student's printed
output. The first process reads it as untrusted (student code ran in the fork): anything malformed, a crash
or a fork that ends without a result turns the side probes into error checks that say so; running out of
memory there ends the whole check as out of memory, as it would in one process. `--side` is off under
`grade --jobs N` when the jobs already fill the cores, and with CUDA (a CUDA context does not survive fork).

A repair's re-check (Limits.costs: the checked run's seconds per probe) shares its probes instead: those either
process may run go, longest first, on a queue both draw from (a pipe holding one byte per probe: a read takes
each byte once). The fork draws from the start; the first process runs the probes that must stay with it (the
gate's and every probe the suite runs before them, in its order; order-bound ones) and then draws too. A repaired model's costs are not the checked one's (overfit
stops at its pass line: a model that memorises faster or never does times it wrong), so a split fixed from
the timings could leave one process idle for a third of the re-check; drawn, the two end within about one
probe of each other. Each probe is seeded by its id and builds its own model and inputs: which process draws
it does not change what it measures.

A repair's re-check with a gate (Limits.gate: the checks its candidate must now pass) stops as soon as one of
them does not (`gate_fails`, the rule repair/verify.py decides by): the probes keep their order and their
process, so what ran measures what it would have; a fork that stops says so on the pipe (`G<probe id>`), the
first process reads that between its probes (`pump`), and a first process that stops ends the fork (`abandon`).
The candidate is then rejected from a partial result in a fraction of a full re-check.
"""
from __future__ import annotations

import gc
import json
import os
import secrets
import select
import signal
import time

from ..checks import PROBE_OF, passes
from ..protocol import MSG_PHASE

MAX_BYTES = 64 * 1024 * 1024      # the side's report; artifacts are bounded by the probes long before this


class Side:
    def __init__(self, pid: int, fd: int, probes: list, key: bytes, gate: frozenset = frozenset(),
                 queue: int | None = None):
        self.pid, self.fd, self.probes, self.key, self.gate = pid, fd, probes, key, gate
        self.ids = {p.id for p in probes}
        self.buf, self.size, self.ended, self.gated = b"", 0, False, ""
        self.queue = queue      # shared: the queue's read end (plan), else None (the fork runs all of `probes`)
        self.taken: set = set()     # shared: the probes the fork said it runs (its `P` lines)

    def theirs(self) -> set:
        """The probes whose checks the fork's report may give: all of them, or, shared, those it drew."""
        return self.ids if self.queue is None else self.ids & self.taken


def parse_gate(text: str) -> frozenset:
    return frozenset(filter(None, text.split(",")))


def gate_fails(checks: list, gate: frozenset, probe_id: str) -> bool:
    """A gate check of this probe's did not pass (checks.passes on the checks this probe reported)."""
    after: dict = {}
    for c in checks:
        if isinstance(c, dict) and isinstance(c.get("id"), str):
            after.setdefault(c["id"], c)
    mine = [g for g in gate if g in after or PROBE_OF.get(g, g) == probe_id]
    return bool(mine) and not passes(after, mine)


def plan(todo: list, allowed: bool, costs: dict | None = None, gate: frozenset = frozenset()) -> tuple[list, bool]:
    """(the probes to run beside the others, shared). A check: those marked `side`, or in a full check only
    the long training ones (brief-training: the rest then balance it), run by the fork alone (shared False).
    With `costs` (a repair's re-check: seconds per probe as the checked run measured them): every probe
    either process may run (`side` ones and probes.EITHER), longest first, on a queue both draw from (shared
    True; see `shares`); the gate's probes stay here, where a failure stops the re-check at once (the fork's is
    read only between this one's probes)."""
    if not allowed:
        return [], False
    if costs:
        return shares(todo, costs, frozenset(PROBE_OF.get(g, g) for g in gate)), True
    beside = [p for p in todo if p.side]
    if any(p.cost == "train" for p in beside):
        beside = [p for p in beside if p.cost == "train"]
    return beside, False


def shares(todo: list, costs: dict, keep: frozenset = frozenset()) -> list:
    """The probes both processes draw from, longest first (the checked run's costs; one it did not time costs
    the median): the longest start at once, and what is left at the end is short, so the two end together
    whatever the repaired model's own costs. Empty when there is nothing to share: a lone probe needs no fork.
    A re-check of the forward path otherwise leaves the second core idle (its training probes are ~0.9 s of
    the ~2.5 s)."""
    from .probes import EITHER
    run = [p for p in todo if p.cost != "static"]
    known = sorted(costs.values())
    typical = known[len(known) // 2] if known else 0.05

    def cost(p) -> float:
        return costs.get(p.id, typical)
    # a kept probe runs here after the probes a check runs before it in its process (the training ones after
    # the training ones, the others after the others), in the suite's order: what it measures can depend on
    # them (state the student's module keeps across probes, e.g. a cached mask changed in place), so none of
    # those is shared
    last = {kind: max((i for i, p in enumerate(run) if p.id in keep and p.side == kind), default=-1)
            for kind in (False, True)}
    movable = [p for i, p in enumerate(run) if (p.side or p.id in EITHER) and p.id not in keep and i > last[p.side]]
    if len(movable) + (len(run) > len(movable)) < 2:
        return []
    return sorted(movable, key=cost, reverse=True)     # stable: equal costs keep the suite's order


def drawn(side: Side | None):
    """The shared probes this process runs once its own are done: each one the queue still holds."""
    if side is not None and side.queue is not None:
        yield from _drawing(side.queue, side.probes)


def _drawing(queue: int, probes: list):
    while (i := _draw(queue)) is not None:
        if i < len(probes):
            yield probes[i]


def _draw(fd: int) -> int | None:
    """The next index on the queue; None once it is empty (or unreadable: then nothing more is drawn here)."""
    while True:
        try:
            b = os.read(fd, 1)
        except InterruptedError:
            continue
        except OSError:
            return None
        return b[0] if b else None


def parse_costs(text: str) -> dict:
    """`probe:seconds,...` (Limits.costs) as a dict; what is malformed is left out (it only balances)."""
    out = {}
    for part in text.split(","):
        name, _, v = part.partition(":")
        try:
            x = float(v)
        except ValueError:
            continue
        if name and 0 <= x < 1e6:
            out[name] = x
    return out


def start(probes: list, run, ctx, guard, audit, captured, jsonable, gate: frozenset = frozenset(),
          shared: bool = False) -> Side | None:
    """Fork; the fork runs `probes` with run(probe) (shared: those it draws from their queue, see `drawn`) and
    reports on a pipe. None: could not fork (run them here).

    The report is keyed as the result channel is (a fresh key, in memory only): writing a forged report to
    the pipe takes finding the key, not just the descriptor. jsonable: the child's JSON fallback."""
    try:
        r, w = os.pipe()
    except OSError:
        return None
    queue = None
    if shared and len(probes) < 256:    # a suite has a few dozen probes: a byte names each
        try:        # one byte per probe, longest first (shares); no writer is left: empty reads as the end
            queue, qw = os.pipe()
            os.write(qw, bytes(range(len(probes))))
            os.close(qw)
        except OSError:
            os.close(r), os.close(w)
            return None
    key = secrets.token_hex(16).encode()
    marks = (len(guard.findings), len(guard.accepted), len(guard.module_changes), len(captured.parts),
             {k: id(v) for k, v in ctx.artifacts.items()}, captured.dropped, dict(audit.counts))
    was, audit._busy = audit._busy, True        # the harness's own fork: not an operation of the student's
    gc.freeze()     # the fork's collections then skip what it shares with this process (see zygote._warm_up)
    try:
        pid = os.fork()
    except OSError:
        os.close(r), os.close(w)
        if queue is not None:
            os.close(queue)
        gc.unfreeze()
        return None
    finally:
        audit._busy = was
    if pid:
        gc.unfreeze()                           # this process collects as before
        os.close(w)
        return Side(pid, r, probes, key, gate, queue)
    os.close(r)                                 # the fork: run the side probes, report, and end
    code = 0
    try:
        out = {"checks": {}, "timings": {}}
        for p in _drawing(queue, probes) if queue is not None else probes:
            os.write(w, f"P{p.id}\n".encode())     # which one runs now: the first process passes it on
            t = time.perf_counter()
            out["checks"][p.id] = run(p)
            out["timings"][p.id] = round(time.perf_counter() - t, 3)
            if gate and gate_fails(out["checks"][p.id], gate, p.id):
                os.write(w, f"G{p.id}\n".encode())      # the rest would not change the answer: report now
                break
        n_find, n_acc, n_mod, n_parts, art, n_dropped, n_kinds = marks
        out["artifacts"] = {k: v for k, v in ctx.artifacts.items() if art.get(k) != id(v)}
        if ctx.reach is not None and ctx.reach.on:
            out["coverage"] = {i: ctx.reach.by.get(i, []) for i in out["checks"]}     # the probes it ran
        out["guard"] = {"findings": guard.findings[n_find:], "lines": guard.lines[n_find:],
                        "accepted": guard.accepted[n_acc:], "module_changes": guard.module_changes[n_mod:]}
        out["audit"] = [[list(k), rec] for k, rec in audit.records.items()]
        out["audit_dropped"] = audit.dropped
        out["audit_counts"] = {op: n - n_kinds.get(op, 0) for op, n in audit.counts.items() if n > n_kinds.get(op, 0)}
        out["printed"] = "".join(captured.parts[n_parts:])
        out["printed_dropped"] = captured.dropped - n_dropped      # what printing past the bound lost here
        data = b"R" + key + json.dumps(out, default=jsonable).encode("utf-8", "replace") + b"\n"
        view = memoryview(data)
        while view:
            view = view[os.write(w, view[:65536]):]
    except BaseException:                       # noqa: BLE001 - the first process reports a fork with no result
        code = 1
    os._exit(code)


def finish(side: Side, timings: dict, guard, audit, captured, ctx, die, exit_memory: int, send) -> dict:
    """Wait for the fork, merge what it recorded; {probe id: its checks} of the side probes.

    The fork's lines: `P<probe id>` as each probe starts (passed on as this run's phase, so progress and a
    timeout's 'while running' name it), then `R<report JSON>`."""
    _forward_stack_requests(side.pid)
    while not side.ended:
        try:
            _take(side, os.read(side.fd, 1 << 20), send)
        except InterruptedError:
            continue
    buf = side.buf
    report_bytes = buf[1 + len(side.key):] if buf.startswith(b"R" + side.key) and side.size <= MAX_BYTES else b""
    _close(side)
    _, status = os.waitpid(side.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    ids = side.theirs()
    if code == exit_memory:
        die(exit_memory, "mtxdiag: the submission ran out of memory in a training check")
    report = _parse(report_bytes)
    try:
        if report is not None:
            _merge_integrity(report, guard, audit, captured, ctx)
    except Exception:         # noqa: BLE001 - a report of the wrong shape is no report
        report = None
    if report is None:
        why = f"ended by signal {-code}" if code < 0 else f"exited with status {code}" if code else \
            "sent a report that could not be read"
        from .probes.base import check
        return {p.id: [check(p.id, "error", {"exception": "SideProcessFailed", "message": why},
                             "runs without raising", f"the process running this check {why}",
                             data={"exception": "SideProcessFailed", "message": why,
                                   "where": "the training checks' process", "timeout": False})]
                for p in side.probes if p.id in ids}
    timings.update({k: v for k, v in report.get("timings", {}).items() if k in ids and k not in timings})
    timings["side_process"] = 1            # the training probes ran in a second process
    return {p.id: [c for c in report["checks"].get(p.id) or [] if isinstance(c, dict)] for p in side.probes
            if p.id in ids}


def pump(side: Side) -> bool:
    """What the fork wrote so far, read without waiting; True once it stopped at a gate. Its phases are not
    passed on: this process's own probe is the one running here."""
    while not side.ended and select.select([side.fd], [], [], 0)[0]:
        try:
            _take(side, os.read(side.fd, 1 << 20), None)
        except InterruptedError:
            continue
    return bool(side.gated)


def abandon(side: Side) -> None:
    """The first process stopped at a gate: end the fork, keep nothing of it (its probes' answers are moot)."""
    try:
        os.kill(side.pid, signal.SIGKILL)
    except OSError:
        pass
    _close(side)
    os.waitpid(side.pid, 0)


def _close(side: Side) -> None:
    os.close(side.fd)
    if side.queue is not None:
        os.close(side.queue)
        side.queue = None


def _take(side: Side, b: bytes, send) -> None:
    """Bytes from the fork: `P<id>` / `G<id>` lines until the report (`R<key><JSON>`), which is kept whole."""
    if not b:
        side.ended = True
        return
    side.size += len(b)
    if side.size > MAX_BYTES:
        side.buf = b""
        return
    side.buf += b
    ids = side.ids
    while not side.buf.startswith(b"R") and b"\n" in side.buf:
        line, side.buf = side.buf.split(b"\n", 1)
        name = line[1:].decode("ascii", "replace")
        if name in ids and line.startswith(b"P"):
            side.taken.add(name)
            if send is not None:
                send({"event": MSG_PHASE, "name": name})
        elif name in ids and line.startswith(b"G") and side.gate:     # only a re-check with a gate stops
            side.gated = name


def _forward_stack_requests(pid: int) -> None:
    """From now on this process only waits: the parent's SIGUSR1 (a check that ran too long, runner._stop)
    asks the fork for its stack instead, which names the student's stuck line (the fork inherited the
    faulthandler registration and its file)."""
    import faulthandler
    import signal

    def forward(signum, frame):
        try:
            os.kill(pid, signal.SIGUSR1)
        except OSError:
            pass
    try:
        faulthandler.unregister(signal.SIGUSR1)
        signal.signal(signal.SIGUSR1, forward)
    except (ValueError, OSError, RuntimeError):
        pass


def _merge_integrity(report: dict, guard, audit, captured, ctx) -> None:
    g = report.get("guard") or {}
    for what, line in zip(g.get("findings", []), g.get("lines", [])):
        if isinstance(what, str) and what not in guard.findings:
            guard.findings.append(what)
            guard.lines.append(line if isinstance(line, int) else None)
    guard.accepted.extend(x for x in g.get("accepted", []) if x not in guard.accepted)
    guard.module_changes.extend(tuple(x) for x in g.get("module_changes", []) if isinstance(x, list))
    for key, rec in report.get("audit", []):
        key = tuple(key)
        if key in audit.records:
            audit.records[key]["count"] = max(audit.records[key]["count"], rec.get("count", 1))
        elif isinstance(rec, dict):
            audit.records[key] = rec
    audit.dropped = max(audit.dropped, int(report.get("audit_dropped") or 0))
    for op, n in (report.get("audit_counts") or {}).items():      # the fork's attempts, by kind, since it forked
        if isinstance(op, str) and isinstance(n, int) and n > 0:
            audit.counts[op] = audit.counts.get(op, 0) + n
    captured.write(str(report.get("printed") or ""))
    dropped = report.get("printed_dropped")
    captured.dropped += dropped if isinstance(dropped, int) and dropped > 0 else 0
    if ctx.reach is not None:
        ctx.reach.merge_from(report.get("coverage"))
    arts = report.get("artifacts")
    if isinstance(arts, dict):
        ctx.artifacts.update(arts)


def _parse(data: bytes):
    try:
        report = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return None
    if not isinstance(report, dict) or not isinstance(report.get("checks"), dict):
        return None
    return report
