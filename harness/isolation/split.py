"""A pack's run in two processes (issue 45): the student's code in a model server, the probes in the prober.

The trusted parent (runner.run_spec) starts both and connects them with a socketpair. The model server
(harness/child/modelserver.py with modelwire.py: standalone stdlib+torch scripts copied into the run's `server/`
folder, run as `python -I -S`) holds the submission's second copy and nothing of the grader: under bubblewrap its sandbox binds
the interpreter, its site folders and that folder only (no harness snapshot, no reference, no mutants); without
bubblewrap it is still a process of its own, whose interpreter reads no .pth file and no PYTHONPATH. The prober is
the usual child (harness.child.main) with the harness; it never imports the submission (child/pack_remote.py).

Both processes share the run's limits (rlimits, the run's cgroup) and its token; the run's end kills both trees.
This is the cold path; in a warm slot both are forks of the slot's two workers (warm_split.py).
The server's stdout and stderr are one pipe of their own (SplitRun.output): the parent reads, counts and keeps what
it prints apart from the prober's, so a flood of the student's code is counted where it happens, as the student's
(runner._flood: check `output-flood`), never by an object in a process the student's code could reach.
Torch-free, parent side.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from ..identity import PACK_PACKAGES
from ..protocol import SERVER_FD_VAR, wire_argv
from . import held, sandbox
from .scratch import env as _env

SERVER = Path(__file__).resolve().parents[1] / "child" / "modelserver.py"
WIRE = SERVER.with_name("modelwire.py")     # the message format, imported by the server from beside it
RECORD = SERVER.with_name("modelrecord.py")     # the server's recorder, imported from beside it too
SWITCH = "MTXDIAG_PACK_SPLIT"        # "0": a pack's run in one process, as before issue 45 (benches compare);
#                                      "trial": the packs declared Pack.split "trial" split too


def wanted(pack, submission: Path) -> bool:
    """Whether this submission runs split: its pack says so (Pack.runs_split under the switch) and it is what
    the server loads (a folder pack's folder; a one-file pack's .py file: a notebook runs in one process)."""
    if pack is None or not pack.runs_split(os.environ.get(SWITCH, "1").strip()):
        return False
    return submission.is_dir() if pack.is_folder else pack.is_file and submission.suffix == ".py"


def assignment_of_file(path: Path, asked: str) -> str:
    """The assignment a file asked as `auto` is checked as, when the one its text defines (its top-level classes
    and functions: assignments.detect, as the child detects it on the names it loaded) is a split pack's: the
    child is then told it (it loads the file in the server for that pack's names); else `asked`."""
    import ast
    from .. import assignments
    switch = os.environ.get(SWITCH, "1").strip()
    if asked != assignments.AUTO or path.suffix != ".py" or not any(
            p.is_file and p.runs_split(switch) for p in assignments.PACKS.values()):
        return asked                    # (no one-file pack splits: the file is not read here)
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError, RecursionError, MemoryError):
        return asked
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}
    found = assignments.detect(names.__contains__)
    return found if wanted(assignments.pack_of(found), path) else asked


def launch(args, work: Path, nonce: str, token: str, lim, isolation: str, device: str, preexec, cold_run):
    """Start the model server and the prober: (a run handle, the result fd, stdout fd, stderr fd).
    preexec: the run's limits (runner._limits(...)); cold_run(proc, token, work, isolation): the prober's handle."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    r, w = os.pipe()
    key_r, key_w = os.pipe()
    os.write(key_w, (nonce + "\n").encode())
    os.close(key_w)
    srv_r, srv_w = os.pipe()            # the server's stdout and stderr: the student's output, counted apart
    mine, theirs = socket.socketpair()
    server = prober = None
    try:
        server = start_server(work, theirs, lim, isolation, device, token, preexec, srv_w, srv_w)
        theirs.close()
        env = dict(_env(lim.threads, work, isolation, token), **{SERVER_FD_VAR: str(mine.fileno())})
        cmd = sandbox.command([sys.executable, "-m", "harness.child.main"] + list(args) + wire_argv(w), work=work,
                              isolate=isolation, pass_fd=w, device=device)
        prober = subprocess.Popen(cmd, cwd=work, env=env, stdin=key_r, stdout=out_w, stderr=err_w,
                                  pass_fds=(w, mine.fileno()), preexec_fn=preexec, close_fds=True)
    except BaseException:
        for fd in (r, out_r, err_r, srv_r):
            os.close(fd)
        if server is not None:
            _end(server, token)
        raise
    finally:
        for fd in (w, key_r, out_w, err_w, srv_w):
            os.close(fd)
        mine.close()
        theirs.close()
    run = SplitRun(cold_run(prober, token, work, isolation), server, token, isolation, srv_r)
    return run, r, out_r, err_r


def copy_submission(work: Path, to: Path) -> None:
    """The server's copy of the run's submission: a pack's folder (work/repo), or a one-file pack's file
    (runner: work/submission.py) as module `submission`."""
    if (work / "repo").is_dir():
        shutil.copytree(work / "repo", to, symlinks=False)
    else:
        to.mkdir()
        shutil.copyfile(work / "submission.py", to / "submission.py")


def start_server(work: Path, sock, lim, isolation: str, device: str, token: str, preexec, out_w: int, err_w: int):
    """The model server in `work/server/`: the submission's copy and the server script, nothing else."""
    home = work / "server"
    home.mkdir()
    copy_submission(work, home / "repo")
    shutil.copyfile(SERVER, home / "modelserver.py")
    shutil.copyfile(WIRE, home / "modelwire.py")
    shutil.copyfile(RECORD, home / "modelrecord.py")
    fd = sock.fileno()
    sites = [a for d in sandbox.python_path("bwrap")[1:] for a in ("--site", d)]     # the site folders
    cmd = sandbox.command([sys.executable, "-I", "-S", str(home / "modelserver.py"), "--fd", str(fd), "--root",
                           str(home / "repo")] + sites, work=home, isolate=isolation, pass_fd=fd, device=device,
                          grader=False)
    if isolation == "bwrap":            # the installed packs (their references) are the grader's too: hidden
        at = cmd.index("--bind")
        cmd[at:at] = [a for d in _pack_dirs() for a in ("--tmpfs", d)]
    env = _env(lim.threads, home, isolation, token)
    env.pop("PYTHONPATH", None)
    return subprocess.Popen(cmd, cwd=home, env=env, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
                            pass_fds=(fd,), preexec_fn=preexec, close_fds=True)


def _pack_dirs() -> list[str]:
    """The folders of the installed packs' packages (identity.PACK_PACKAGES), found without importing them."""
    import importlib.util
    out = []
    for name in PACK_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        out += [os.path.realpath(p) for p in (spec.submodule_search_locations or []) if spec and os.path.isdir(p)]
    return out


def _end(proc, token: str) -> None:
    sandbox.kill_tree(proc.pid, token, proc.pid)
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class SplitRun:
    """The prober's handle (runner._ColdRun) with the server beside it: waited for through the prober, both
    watched for memory, both killed at the end; `output`: the read end of the server's stdout and stderr (the
    runner drains it)."""

    def __init__(self, prober, server, token: str, isolation: str, output: int | None = None):
        self.prober, self.server, self.token, self.isolation = prober, server, token, isolation
        self.output = output

    def members(self):
        return set(self.prober.members()) | sandbox.members(self.server.pid, self.token, self.server.pid)

    def watched(self):
        below = held.descendants(self.server.pid) if self.isolation == "bwrap" else None
        mine = below if below is not None else sandbox.members(self.server.pid, self.token, self.server.pid)
        return set(self.prober.watched()) | set(mine)

    def wait(self, deadline: float, watch=None):
        return self.prober.wait(deadline, watch)

    def end(self):
        self.prober.end()

    def stop(self) -> str:
        return self.prober.stop()

    def kill(self):
        self.prober.kill()
        _end(self.server, self.token)

    @property
    def returncode(self):
        return self.prober.returncode
