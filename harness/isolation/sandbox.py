"""How the child command is wrapped, and how its whole process tree is found and killed.

With bubblewrap (`bwrap`, apt package `bubblewrap`) the child runs in new user,
pid, network, ipc, uts and cgroup namespaces: no network at all, a read-only
view of only what Python needs (the interpreter's prefix, site-packages,
/usr and a few files of /etc) on a read-only root, a private size-capped
/tmp, /var/tmp and /dev/shm (SCRATCH_MB), and a single writable folder of
the host, the run's own work folder that holds a copy of the submission. The harness
and the reference model are visible read-only as a snapshot of their .py
files and of the few data files the child reads (CHILD_DATA: lm's trained
checkpoint; no rubric, no templates, no other file of the repository), under
/opt/mtxdiag. Other students' folders, the grading output, the home folder
and the repository are simply not there. The sandbox dies with its parent.

MTXDIAG_ISOLATE=bwrap|none overrides "auto" (CI: require it; an instructor: turn it off).
`available()` test-runs bwrap once per process (user namespaces can be
disabled by the kernel or by AppArmor, e.g. Ubuntu 24.04's default) and
caches the answer; with isolate="auto" the runner falls back to running
without it, with a warning. isolate="bwrap" makes it mandatory.

Whatever the mode, `kill_tree()` finds every process of a run - descendants
by parent links, members of the run's session, and any process carrying the
run's token in its environment (which survives setsid and double forks) -
freezes them with SIGSTOP so that none can fork any more, then kills them.
"""
from __future__ import annotations

import atexit
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

from ..identity import PACKAGES
from . import forkcare

RUNTIME_MOUNT = "/opt/mtxdiag"        # where the harness snapshot appears inside the sandbox
TOKEN_VAR = "MTXDIAG_RUN"            # environment variable that marks every process of one run
# Size caps (MB) of the sandbox's writable tmpfs: memory a run could otherwise hold outside its memory limit.
SCRATCH_MB = {"/tmp": 256, "/var/tmp": 64, "/dev/shm": 256}
_lock = threading.RLock()
_state: dict = {}


# ---------------------------------------------------------------------------
# availability
# ---------------------------------------------------------------------------

def available() -> bool:
    """True when bubblewrap is installed AND works here (tested once per process, cached)."""
    with _lock:
        if "available" not in _state:
            ok, why = _try_bwrap()
            _state["available"], _state["why"] = ok, why
        return _state["available"]


def unavailable_reason() -> str:
    available()
    return _state.get("why", "")


def mode(isolate: str = "auto") -> str:
    """'bwrap' or 'none' for a requested isolation ('auto', 'bwrap', 'none').

    With 'auto', the environment variable MTXDIAG_ISOLATE (auto, bwrap or none) decides first: CI can
    require the sandbox, an instructor can turn it off."""
    if isolate == "auto":
        isolate = os.environ.get("MTXDIAG_ISOLATE", "auto").strip().lower() or "auto"
    if isolate == "none":
        return "none"
    if isolate not in ("auto", "bwrap"):
        raise ValueError(f"isolate must be 'auto', 'bwrap' or 'none', not {isolate!r}")
    if available():
        return "bwrap"
    if isolate == "bwrap":
        raise RuntimeError(f"bubblewrap isolation was required but cannot be used: {unavailable_reason()}")
    with _lock:
        if not _state.get("warned"):
            _state["warned"] = True
            warnings.warn("mtxdiag: bubblewrap (bwrap) is not usable here (" + unavailable_reason() + "); student "
                          "code runs with resource limits only: it can read and write whatever your user can and "
                          "open network connections. Install bubblewrap (apt-get install bubblewrap) and allow "
                          "user namespaces to isolate it.", RuntimeWarning, stacklevel=3)
    return "none"


def _try_bwrap() -> tuple[bool, str]:
    exe = shutil.which("bwrap")
    if not exe:
        return False, "bwrap is not installed"
    work = Path(tempfile.mkdtemp(prefix="mtxdiag-probe-"))
    try:
        cmd = _bwrap_args(exe, work, "cpu") + [sys.executable, "-S", "-c", "import os; os.listdir('.')"]
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        if r.returncode != 0:
            why = r.stderr.decode("utf-8", "replace").strip()[-300:] or f"exit status {r.returncode}"
            return False, "bwrap failed: " + why
        return True, ""
    except (OSError, subprocess.SubprocessError) as e:
        return False, f"bwrap failed: {e}"
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------

def command(cmd: list[str], *, work: Path, isolate: str = "auto", pass_fd: int | None = None,
            device: str = "cpu", run_namespaces: bool = False, grader: bool = True) -> list[str]:
    """The command line that runs `cmd` (the child) under the requested isolation.

    Inherited file descriptors (the result pipe `pass_fd`) pass through bwrap unchanged. run_namespaces: a warm
    worker, which gives each run user, IPC and mount namespaces of its own (confine.private_namespaces), so the
    sandbox may not forbid making one; a run's seccomp filter forbids it instead (confine.protect). grader=False:
    the harness snapshot is not mounted (a pack's model server, isolation/split.py: nothing of the grader)."""
    if mode(isolate) == "none":
        return cmd
    return _bwrap_args(shutil.which("bwrap") or "bwrap", Path(work), device, run_namespaces, grader) + list(cmd)


def python_path(isolate_mode: str) -> list[str]:
    """PYTHONPATH for the child: the harness snapshot first, then the interpreter's site directories."""
    roots = [RUNTIME_MOUNT] if isolate_mode == "bwrap" else [str(_package_root())]
    return roots + _site_dirs()


def _package_root() -> Path:
    return Path(__file__).resolve().parents[2]


def _site_dirs() -> list[str]:
    out = []
    for p in sys.path:
        if p and ("site-packages" in p or "dist-packages" in p) and os.path.isdir(p):
            out.append(os.path.realpath(p))
    return list(dict.fromkeys(out))


def _bwrap_args(exe: str, work: Path, device: str, run_namespaces: bool = False, grader: bool = True) -> list[str]:
    work = str(Path(work).resolve())
    a = [exe, "--unshare-user", "--uid", "65534", "--gid", "65534", "--unshare-pid", "--unshare-net",
         "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox",
         "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if not run_namespaces and _supports("--disable-userns"):
        a += ["--disable-userns"]
    # The writable places besides the run's folder are size-capped tmpfs (their memory is not the address
    # space the memory limit counts); the root and /dev are remounted read-only at the end.
    a += ["--proc", "/proc", "--dev", "/dev", "--size", str(SCRATCH_MB["/dev/shm"] << 20), "--tmpfs", "/dev/shm"]
    for top in ("/tmp", "/var/tmp"):
        a += ["--size", str(SCRATCH_MB[top] << 20), "--tmpfs", top]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            a += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            a += ["--ro-bind", top, top]
    a += ["--ro-bind", "/usr", "/usr"]
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives",
              "/etc/nsswitch.conf", "/etc/os-release"):
        if os.path.exists(f):
            a += ["--ro-bind", f, f]
    bound = _python_dirs()
    for p in bound:
        a += ["--ro-bind", p, p]
    for q in _mask_dirs(bound):
        a += ["--tmpfs", q] + (["--remount-ro", q] if _supports("--remount-ro") else [])
    if grader:
        a += ["--ro-bind", str(runtime_snapshot()), RUNTIME_MOUNT]
    if str(device).startswith("cuda"):
        for d in sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri/*")):
            a += ["--dev-bind", d, d]
        for p in ("/sys", "/run/nvidia-persistenced"):
            if os.path.exists(p):
                a += ["--ro-bind", p, p]
    a += ["--bind", work, work, "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", work, "--"]
    return a


def _private_dirs() -> list[str]:
    """What student code must not see of mtxdiag itself: the repository when this is a checkout (editable
    install), or the three installed packages when mtxdiag was installed into a site folder (wheel, --user,
    system) - there the folder around them is torch's and everyone else's, and must stay visible."""
    root = str(_package_root())
    if os.path.isfile(os.path.join(root, "pyproject.toml")) or os.path.isdir(os.path.join(root, ".git")):
        return [root]
    return [os.path.join(root, pkg) for pkg in PACKAGES]


def _import_dirs() -> list[str]:
    """Every folder the interpreter imports from: its prefixes, the standard library, every site folder of
    any install kind (venv, --user, system, .pth-added paths), never the folder of the command that started
    us (sys.path[0]: the working folder with `python -m`, which may be the class's submissions)."""
    import sysconfig
    cands = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             str(Path(os.path.realpath(sys.executable)).parent.parent)]
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            cands.append(sysconfig.get_path(key))
        except KeyError:
            pass
    skip = {"", "/", os.getcwd(), os.path.expanduser("~")}
    import tempfile         # the runs' scratch folders (/tmp/mtxdiag-*) live there: never bound into a sandbox
    scratch = os.path.realpath(tempfile.gettempdir())
    skip |= {scratch, "/tmp", "/var/tmp", "/dev/shm"}
    first = sys.path[0] if sys.path else ""
    for i, p in enumerate(sys.path):
        if i == 0 and "site-packages" not in first and "dist-packages" not in first:
            continue
        if p not in skip:
            cands.append(p)
    cands += _site_dirs()
    out = []
    for c in cands:
        if c and os.path.exists(c):
            out.append(os.path.realpath(c))
    skipped = {os.path.realpath(s) for s in skip if s}
    return [p for p in dict.fromkeys(out) if p not in skipped and not scratch.startswith(p.rstrip("/") + "/")]


def _python_dirs() -> list[str]:
    """The interpreter's installation and what it imports from, never mtxdiag's private folders (those are
    masked by `_mask_dirs`) and never a folder that holds the repository checkout."""
    private = _private_dirs()
    out: list[str] = []

    def under(p, q):
        return p == q or p.startswith(q.rstrip(os.sep) + os.sep)

    for p in sorted(_import_dirs(), key=len):
        if p in ("/", "/usr") or p.startswith("/usr/"):
            continue                         # /usr is bound whole
        if any(under(p, q) for q in out) or any(under(p, q) for q in private):
            continue
        holds = [q for q in private if under(q, p)]
        if holds and len(private) == 1:      # a checkout inside this prefix: only the interpreter's parts
            for sub in ("bin", "lib", "lib64", "include", "pyvenv.cfg"):
                s = os.path.join(p, sub)
                if os.path.exists(s) and not under(private[0], s):
                    out.append(s)
            continue
        out.append(p)
    return out


def _mask_dirs(bound: list[str]) -> list[str]:
    """mtxdiag's installed packages that sit inside a bound folder (a wheel install's site-packages, or /usr
    for a system install): hidden under an empty tmpfs, the child reads the .py snapshot instead."""
    roots = bound + ["/usr"]
    return [q for q in _private_dirs() if os.path.isdir(q) and
            any(q.startswith(r.rstrip(os.sep) + os.sep) for r in roots)]


def _supports(flag: str) -> bool:
    key = "help"
    if key not in _state:
        try:
            r = subprocess.run([shutil.which("bwrap") or "bwrap", "--help"], capture_output=True, timeout=10)
            _state[key] = (r.stdout + r.stderr).decode("utf-8", "replace")
        except (OSError, subprocess.SubprocessError):
            _state[key] = ""
    return flag in _state[key]


# The data files the child reads, beside the .py files (each package's own folder). Only these: the grader's other
# files (the rubric, the report templates, the reference's measured brief training) stay out of the sandbox; the
# parent reads them (engine fills the reference's numbers into the checks that compare with them).
CHILD_DATA = {"reference_model": ("lm_tiny.pt", "lm_tiny.json")}   # lm's trained checkpoint: probes/lm/components


def runtime_snapshot() -> Path:
    """A private copy of the .py files of `harness`, `reference_model` and `mutants`, and of CHILD_DATA (made once
    per process)."""
    with _lock:
        snap = _state.get("snapshot")
        if snap and snap.exists():
            return snap
        snap = Path(tempfile.mkdtemp(prefix="mtxdiag-runtime-"))
        import harness
        import mutants            # lm's mutant fingerprints run the mutants' code in the child
        import reference_model
        for pkg in (harness, reference_model, mutants):
            src = Path(pkg.__file__).resolve().parent
            data = [src / name for name in CHILD_DATA.get(src.name, ())]
            for f in list(src.rglob("*.py")) + [f for f in data if f.is_file()]:
                if "__pycache__" in f.parts:
                    continue
                dst = snap / src.name / f.relative_to(src)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, dst)
        for d in [snap] + [p for p in snap.rglob("*") if p.is_dir()]:
            os.chmod(d, 0o755)
        for f in snap.rglob("*"):
            if f.is_file():
                os.chmod(f, 0o444)
        atexit.register(shutil.rmtree, snap, True)
        _state["snapshot"] = snap
        return snap


# ---------------------------------------------------------------------------
# finding and killing a run's processes
# ---------------------------------------------------------------------------

def _table() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, session, state) for every visible process."""
    return forkcare.table()


def _has_token(pid: int, token: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read(1 << 20)
    except OSError:
        return False
    return f"{TOKEN_VAR}={token}".encode() in env.split(b"\0")


def members(root: int | None, token: str | None = None, session: int | None = None) -> set[int]:
    """Every live process of one run: descendants of `root`, members of `session`, carriers of `token`."""
    table = _table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    seeds = set()
    if root is not None and root in table:
        seeds.add(root)
    if session:
        seeds |= {pid for pid, (_, sid, _) in table.items() if sid == session}
    if token:
        seeds |= {pid for pid in table if pid not in seeds and _has_token(pid, token)}
    found, stack = set(), list(seeds)
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        found.add(pid)
        stack.extend(children.get(pid, ()))
    me = os.getpid()
    protected = {0, 1, me}
    p = me
    while p in table and p not in (0, 1):   # never our own ancestors
        p = table[p][0]
        protected.add(p)
    return {p for p in found if p not in protected and table.get(p, (0, 0, "Z"))[2] != "Z"}


def kill_tree(root: int | None, token: str | None = None, session: int | None = None, rounds: int = 20) -> int:
    """Freeze then kill every process of the run; returns how many were killed."""
    killed: set[int] = set()
    for _ in range(rounds):
        frozen: set[int] = set()
        for _ in range(10):        # stop them all first: a stopped process cannot fork
            new = members(root, token, session) - frozen
            if not new:
                break
            for p in new:
                _signal(p, signal.SIGSTOP)
            frozen |= new
        if not frozen:
            break
        for p in frozen:
            _signal(p, signal.SIGKILL)
        killed |= frozen
        time.sleep(0.02)
    return len(killed)


def kill_descendants() -> None:
    """Child side, before exiting: kill everything this process started (it is their subreaper)."""
    forkcare.kill_descendants()


def find_child(root: int) -> int | None:
    """The harness child's pid in the tree under `root` (bwrap sits in between)."""
    table = _table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    level = [root]
    while level:                            # breadth first: the outermost python running harness.child.main
        for pid in sorted(level):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if b"harness.child.main" in argv and not os.path.basename(argv[0]).startswith(b"bwrap"):
                return pid
        level = [c for p in level for c in children.get(p, ())]
    return None


def _signal(pid: int, sig) -> None:
    forkcare.send_signal(pid, sig)


def set_subreaper() -> bool:
    """Make the calling process the reaper of its orphaned descendants (Linux), so they stay findable."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0   # PR_SET_CHILD_SUBREAPER
    except Exception:
        return False
