"""The process boundary, typed: what the parent asks a child (`CheckSpec`), what the parent hands its callers
(`Result` with its `Check`s and `Diagnosis`es, JSON schema 1) and the wire constants both sides agree on.

Torch-free plain data: the parent (runner, warm, daemon, engine) and the child (child, zygote) import it, so
neither side imports the other for a constant. A request crosses the boundary as argv (`to_argv`/`from_argv`)
or as a daemon's JSON line (`to_json`/`from_json`); a result is built as these types and written as JSON at one
point (`Result.to_json`), exactly as schema 1 has it: the same keys, in the same order.
"""
from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, ClassVar

from . import __version__
from .assignments import NAMES as ASSIGNMENTS
from .limits import LOAD_TIMEOUT_S, MEMORY_MB, OUTPUT_MB, TIMEOUT_S

# ---- the wire ---------------------------------------------------------------------------------------------

RESULT_FD = 3            # where a warm worker's fork finds its result pipe (zygote.py takes it there)
EXIT_CHANNEL = 86        # the child's exit status when the submission closed or replaced its result channel
EXIT_MEMORY = 87         # the child's exit status when the submission ran out of memory (MemoryError, allocator)
MSG_PHASE, MSG_RESULT, MSG_INTEGRITY = "phase", "result", "integrity"   # a result-channel line's "event"
MESSAGE_KINDS = (MSG_PHASE, MSG_RESULT, MSG_INTEGRITY)
# A warm worker's control socket (warm.py <-> zygote.py): a request carries these descriptors, in this order,
# and the fork takes them as these numbers: the run's key (stdin), stdout, stderr, the result pipe.
FORK_FDS = (0, 1, 2, RESULT_FD)
# the worker's answers, one key each: started up (its pid), forked a run (the fork's pid), the run's exit
# status (with what it changed in the worker: `poisoned`), a request it refused
CTL_READY, CTL_STARTED, CTL_EXIT, CTL_POISONED, CTL_ERROR = "ready", "started", "exit", "poisoned", "error"
CTL = (CTL_READY, CTL_STARTED, CTL_EXIT, CTL_POISONED, CTL_ERROR)      # in this order: isolation/forkcare.serve
# a split run's prober (issue 45) gets a fifth descriptor from its warm worker, its end of the model server's
# socket, at this number; the model server's warm worker (child/modelzygote.py) gives its fork the socket here too
SERVER_FD = RESULT_FD + 1
PARENT_CHECKS = ("result-channel", "tamper-static", "output-flood", "isolation",
                 "submission-files")   # check ids only the parent may report (a child's are dropped)
# how a check's child ended, as the runner observed it (outcome.ChildOutcome.status; crosses the daemon's socket)
OUTCOME_STATUSES = ("ok", "timeout", "memory", "crashed", "no-result", "grader-fault")
STATUSES = frozenset({"pass", "fail", "skip", "error", "info"})
VERDICTS = frozenset({"clean", "problems", "error"})
SCHEMA = 1


def wire_argv(result_fd: int, deferred: bool = False) -> list[str]:
    """The transport flags a launcher adds to a spec's argv: the result pipe's descriptor, the key on stdin;
    `deferred`: the LATE limits follow the key on stdin, read once the child has recorded its functions."""
    return ["--auth-stdin", "--result-fd", str(result_fd)] + (["--deferred"] if deferred else [])


# The limits a deferred run (a repair's first re-check, early.py) learns after it started, as JSON on the line
# after its key: the parent works out the candidate and which probes it needs while the fork starts up.
LATE = ("only_probes", "extra_probes", "gate")
MAX_LATE_BYTES = 16384


# ---- the request ------------------------------------------------------------------------------------------

@dataclass
class Limits:
    timeout_s: float = TIMEOUT_S          # every default: harness/limits.py
    memory_mb: int = MEMORY_MB
    file_mb: int = 64
    open_files: int = 512
    threads: int = 0
    processes: int = 256     # extra processes/threads allowed (RLIMIT_NPROC; not enforceable for root)
    output_mb: float = OUTPUT_MB   # more stdout/stderr than this is a finding (check `output-flood`); kept: 256 KB
    load_timeout_s: float = LOAD_TIMEOUT_S   # loading (definitions only) that runs longer ends as `timeout` during load
    cores: int = 1           # 2: the training probes run in a second process beside the others (child_side.py)
    warm: bool = False       # a fork of a warm worker instead of a new interpreter (warm.py; CPU only)
    only_probes: str = ""    # comma-separated probe ids: run just these (a repair's first re-check, repair/verify.py)
    extra_probes: str = ""   # comma-separated probe ids run beside the suite even when --quick skips them
    coverage: bool = False   # record which of the submission's functions each probe ran (harness/reached.py)
    slowdown: float = 0.0    # >= 1: the time budgets' stretch the checked run measured (a repair's re-checks reuse it)
    costs: str = ""          # "probe:seconds,...": the checked run's timings; a repair's re-check queues the probes its
                             # two processes share, longest first, by them (child_side.shares)
    gate: str = ""           # comma-separated check ids a repair's candidate must pass: its re-check stops at the
                             # first that does not (child_side.gate_fails)


@dataclass(frozen=True)
class CheckSpec:
    """One check as asked: by the CLI of the API, by the API of the daemon, by the runner of the child.

    `path` is the user's file (the runner rewrites it to the copy the child reads: `for_child`), `display` the
    name the result shows ("" = the path), `isolate` the sandbox asked for ("auto") or, in a child's argv, the
    one it got ("bwrap" | "none"), `support` a folder of the instructor's extra files that the runner copies into
    the run folder beside the submission (isolation/support_files.py) or, in a child's argv, "." once copied."""
    path: str
    assignment: str = "auto"
    seed: int = 0
    device: str = "cpu"
    quick: bool = False
    isolate: str = "auto"
    display: str = ""
    support: str = ""
    limits: Limits = field(default_factory=Limits)

    def shown(self) -> str:
        return self.display or self.path

    def for_child(self, copy: str, isolation: str) -> "CheckSpec":
        """The spec the child gets: its copy of the submission, the user's name for it, the sandbox it is in, and
        whether extra files are beside it ("."; never the instructor's folder)."""
        return replace(self, path=copy, display=self.shown(), isolate=isolation, support="." if self.support else "")

    @property
    def side(self) -> bool:
        """The training probes run in a second process beside the others (child_side.py; CPU only)."""
        return self.limits.cores >= 2 and self.device == "cpu"

    # -- argv (the child's command line) --
    def to_argv(self) -> list[str]:
        out = []
        for flag, owner, name in _FLAGS:
            v = getattr(self.limits if owner else self, name)
            if isinstance(v, bool):
                out += [flag] if v else []
            else:
                out.append(f"{flag}={v!r}" if isinstance(v, float) else f"{flag}={v}")   # "=": a value may start with "-"
        return out

    @classmethod
    def from_argv(cls, argv: list[str]) -> "CheckSpec":
        return parse_argv(argv)[0]

    # -- JSON (the daemon's request) --
    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "limits"}
        d["limits"] = {f.name: getattr(self.limits, f.name) for f in fields(Limits)}
        return d

    @classmethod
    def from_json(cls, d) -> "CheckSpec":
        """Typed and complete, or ValueError: a request is never half-read."""
        if not isinstance(d, dict) or not isinstance(d.get("limits"), dict):
            raise ValueError("a check request is an object with its limits")
        top = {f.name: f for f in fields(cls) if f.name != "limits"}
        unknown = (set(d) - set(top) - {"limits"}) | (set(d["limits"]) - {f.name for f in fields(Limits)})
        if unknown or "path" not in d:
            raise ValueError(f"a check request with unknown or missing fields: {sorted(unknown) or ['path']}")
        lim = Limits(**{f.name: _typed(f, d["limits"][f.name]) for f in fields(Limits) if f.name in d["limits"]})
        return cls(**{n: _typed(f, d[n]) for n, f in top.items() if n in d}, limits=lim)

    # -- what a result depends on --
    def result_options(self) -> dict:
        """The options that change a check's result (and so belong in the cache key)."""
        opts = {"assignment": self.assignment, "seed": self.seed, "device": self.device, "quick": self.quick}
        if self.limits.output_mb != OUTPUT_MB:   # only when changed: caches made before the option stay valid
            opts["output_mb"] = float(self.limits.output_mb)
        return opts

    def cache_key(self, sha256: str) -> str:
        """A result's key in a resumable run: the submission's bytes, the harness version, the options above."""
        blob = json.dumps({"sha256": sha256, "harness": __version__, **self.result_options()}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()


_RENAMED = {"path": "--submission", "display": "--display-name", "isolate": "--isolation"}
# (flag, is a Limits field, field name): every field of the spec and its limits, one flag each
_FLAGS = tuple((_RENAMED.get(f.name, "--" + f.name.replace("_", "-")), False, f.name)
               for f in fields(CheckSpec) if f.name != "limits") + \
    tuple(("--" + f.name.replace("_", "-"), True, f.name) for f in fields(Limits))


def _default(f):
    return f.default_factory() if f.default is MISSING and f.default_factory is not MISSING else f.default


def _typed(f, v):
    """A field's value from untrusted JSON: the type of its default (an int is a float), or ValueError."""
    want = type(_default(f)) if _default(f) is not MISSING else str
    if want is float and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    if not isinstance(v, want) or (want is int and isinstance(v, bool)):
        raise ValueError(f"{f.name} must be {want.__name__}, not {type(v).__name__}")
    return v


def parse_argv(argv: list[str]) -> tuple[CheckSpec, int, bool, bool]:
    """(the spec, the result pipe's descriptor, whether the run's key comes on stdin, whether LATE limits follow
    it) from a child's argv."""
    ap = argparse.ArgumentParser(prog="harness.child.main", allow_abbrev=False)
    ap.add_argument("--result-fd", type=int, required=True)
    ap.add_argument("--auth-stdin", action="store_true", help="read the run's key from the first line of stdin")
    ap.add_argument("--deferred", action="store_true", help="the LATE limits: stdin's second line, as JSON")
    spec_fields = {f.name: f for f in fields(CheckSpec)} | {"limits." + f.name: f for f in fields(Limits)}
    for flag, owner, name in _FLAGS:
        f = spec_fields[("limits." if owner else "") + name]
        kind = type(_default(f)) if _default(f) is not MISSING else str
        if kind is bool:
            ap.add_argument(flag, dest=flag[2:], action="store_true")
        else:
            ap.add_argument(flag, dest=flag[2:], type=kind, required=_default(f) is MISSING, default=_default(f))
    a = vars(ap.parse_args(argv))
    lim = Limits(**{name: a[flag[2:]] for flag, owner, name in _FLAGS if owner})
    spec = CheckSpec(**{name: a[flag[2:]] for flag, owner, name in _FLAGS if not owner}, limits=lim)
    return spec, a["result_fd"], a["auth_stdin"], a["deferred"] and a["auth_stdin"]


def late_limits(line: bytes, limits: Limits) -> Limits:
    """`limits` with the LATE fields a deferred run was sent (a JSON object of strings, those fields only), or
    ValueError."""
    d = json.loads(line.decode("utf-8"))
    if not isinstance(d, dict) or set(d) - set(LATE) or not all(isinstance(v, str) for v in d.values()):
        raise ValueError("the late limits are an object of the LATE fields, as strings")
    return replace(limits, **d)


# ---- the result (schema 1) --------------------------------------------------------------------------------

ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "ABSENT", "__bool__": lambda self: False})()


class _Record:
    """A schema-1 object: fields in the order the JSON writes them; a field never set stays out of the JSON
    (ABSENT), keys the type does not know are kept after the known ones (`extra`), so that
    `from_json(d).to_json() == d` for any schema-1 object. `strict` reading (what the engine writes) refuses
    an unknown key, a missing required field and a value of the wrong kind."""
    REQUIRED: ClassVar[tuple] = ()
    NESTED: ClassVar[dict] = {}          # field -> the _Record type of its value (lists: of each item)

    def to_json(self) -> dict:
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "extra" or v is ABSENT:
                continue
            if isinstance(v, _Record):
                v = v.to_json()
            elif f.name in self.NESTED and isinstance(v, list):
                v = [x.to_json() if isinstance(x, _Record) else x for x in v]
            out[f.name] = v
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, d, strict: bool = False):
        if not isinstance(d, dict):
            raise ValueError(f"{cls.__name__}: not an object: {str(d)[:100]}")
        known = {f.name for f in fields(cls)} - {"extra"}
        kw = {k: d[k] for k in known if k in d}
        for k, sub in cls.NESTED.items():
            if isinstance(kw.get(k), dict):
                kw[k] = sub.from_json(kw[k], strict)
            elif isinstance(kw.get(k), list):
                kw[k] = [sub.from_json(x, strict) if isinstance(x, dict) else x for x in kw[k]]
        rec = cls(**kw, extra={k: v for k, v in d.items() if k not in known})
        if strict:
            rec.validate()
        return rec

    def validate(self) -> None:
        missing = [k for k in self.REQUIRED if getattr(self, k) is ABSENT]
        if missing or self.extra:
            raise ValueError(f"{type(self).__name__}: missing {missing}, unknown {sorted(self.extra)}")


@dataclass
class Check(_Record):
    """One measured property, as validated by the parent (engine.validate_payload)."""
    id: str = ABSENT
    status: str = ABSENT                 # pass | fail | skip | error | info
    measured: Any = ABSENT
    expected: str = ABSENT
    detail: str = ABSENT
    data: dict = ABSENT
    location: dict | None = ABSENT       # {"file", "line", ...} or None
    extra: dict = field(default_factory=dict)
    REQUIRED: ClassVar[tuple] = ("id", "status", "measured", "expected", "detail", "data", "location")

    def validate(self) -> None:
        super().validate()
        if not isinstance(self.id, str) or self.status not in STATUSES or not isinstance(self.data, dict):
            raise ValueError(f"Check: malformed {self.id!r} ({self.status!r})")


@dataclass
class Diagnosis(_Record):
    """A named cause with its evidence, fix and location; `component` only for lm's per-component ones."""
    id: str = ABSENT
    title: str = ABSENT
    confidence: float = ABSENT
    evidence: list = ABSENT
    fix: str = ABSENT
    location: dict | None = ABSENT
    why: str = ABSENT
    severity: str = ABSENT               # "problem" | "info" (absent in a grader's synthetic row)
    component: str = ABSENT
    # a pack's diagnosis on a piece replayed as the course's own checks call it (harness/packs/course.py): True when
    # those checks would pass, so they would not have seen it; False when they would fail; absent when not measured
    course_invisible: bool = ABSENT
    extra: dict = field(default_factory=dict)
    REQUIRED: ClassVar[tuple] = ("id", "title", "confidence", "evidence", "fix", "location", "why", "severity")

    def validate(self) -> None:
        super().validate()
        if not (isinstance(self.id, str) and isinstance(self.confidence, (int, float))
                and isinstance(self.evidence, list) and all(isinstance(e, str) for e in self.evidence)):
            raise ValueError(f"Diagnosis: malformed {self.id!r}")


@dataclass
class ErrorInfo(_Record):
    """Why a check did not run to the end, and whose fault that is."""
    kind: str = ABSENT
    reason: str = ABSENT
    phase: str | None = ABSENT
    student_fault: bool = ABSENT
    extra: dict = field(default_factory=dict)
    REQUIRED: ClassVar[tuple] = ("kind", "reason", "phase", "student_fault")


@dataclass
class Result(_Record):
    """What `check` writes as JSON (schema 1) and the report, the gradebook and Gradescope read."""
    schema: int = ABSENT
    harness_version: str = ABSENT
    submission: str = ABSENT
    assignment: str | None = ABSENT
    quick: bool = ABSENT
    verdict: str = ABSENT                # clean | problems | error
    diagnoses: list = ABSENT             # [Diagnosis]
    checks: list = ABSENT                # [Check]
    skipped_code: list = ABSENT
    stdout: str = ABSENT
    stderr: str = ABSENT
    artifacts: dict = ABSENT
    timings: dict = ABSENT
    error: ErrorInfo | None = ABSENT
    reference: dict = ABSENT             # reversal with training: the reference's own curves, for the figures
    coverage: dict = ABSENT              # check --repair: probe id -> [[first, last] line] of the functions it ran
    limits: dict = ABSENT                # how the run was limited: {"enforced_by": "cgroup-v2" | "rlimits", ...}
    extra: dict = field(default_factory=dict)
    REQUIRED: ClassVar[tuple] = ("schema", "harness_version", "submission", "assignment", "quick", "verdict",
                                 "diagnoses", "checks", "skipped_code", "stdout", "stderr", "artifacts",
                                 "timings", "error")
    NESTED: ClassVar[dict] = {"diagnoses": Diagnosis, "checks": Check, "error": ErrorInfo}

    def validate(self) -> None:
        super().validate()
        if self.schema != SCHEMA or self.verdict not in VERDICTS or \
                (self.assignment is not None and self.assignment not in ASSIGNMENTS):
            raise ValueError(f"Result: schema {self.schema!r}, verdict {self.verdict!r}, "
                             f"assignment {self.assignment!r}")
        for x in list(self.diagnoses) + list(self.checks) + ([self.error] if self.error is not None else []):
            if not isinstance(x, _Record):
                raise ValueError(f"Result: not an object: {str(x)[:100]}")

# issue 45: a pack's run is split in two processes; the prober (the child) finds its end of the model server's
# socket at this descriptor, named in its environment by the trusted parent (isolation/split.py)
SERVER_FD_VAR = "MTXDIAG_SERVER_FD"
