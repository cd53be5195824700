"""Issue 45 item 6: a pack's split run in a warm slot (isolation/warm_split.py): the prober forked by the slot's warm
worker, the model server by the slot's model-server worker (child/modelzygote.py).

- Warm and cold give the same result (all but the timings) on the CS231n reference and a mutant.
- A submission whose server-side code reaches for the grader and leaves files, processes and shared memory behind,
  run in a warm slot: nothing of the grader importable or mapped in its server (as cold: test_pack_split.py), its
  attempts on the server's worker refused, no credit; then a correct canary in the same slot is clean and sees
  nothing of it, and both workers of the slot are the same ones; a model-server worker that died is replaced.
"""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from harness import api
from harness.isolation import sandbox, warm
from harness.packs.cs231n import reference as ref_module
from harness.packs.cs231n.mutants import MUTANTS
from harness.packs.cs231n.pack import LAYERS, MODELS, PACK
from harness.protocol import Limits

from compare_results import comparable

REFERENCE = Path(ref_module.__file__).read_text()
MODELS_TEXT = "from ..transformer_layers import CaptioningTransformer, VisionTransformer  # noqa: F401\n"
MARK = str(random.randint(100000, 999999))
INIT = "        super().__init__()\n"


@pytest.fixture(scope="module", autouse=True)
def _workers():
    warm.close_all()
    yield
    warm.close_all()


def _folder(root: Path, layers: str) -> Path:
    for rel, text in ((LAYERS, layers), (MODELS, MODELS_TEXT), ("cs231n/__init__.py", ""),
                      ("cs231n/classifiers/__init__.py", "")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _check(folder: Path, hot: bool) -> dict:
    return api.check_file(folder, assignment=PACK.name, quick=True, limits=Limits(timeout_s=180, warm=hot))


def _slot() -> tuple:
    pool = [w for ws in warm._idle.values() for w in ws]
    assert len(pool) == 1, "one warm slot expected"
    w = pool[0]
    return w, w.proc.pid, w.server, w.server.proc.pid if w.server is not None and w.server.proc else None


def test_warm_and_cold_identical_on_a_mutant(tmp_path):
    """The whole result but the timings (ids, statuses, lines, diagnoses); the reference's warm runs are the
    canaries below (clean)."""
    scale = next(m for m in MUTANTS if m.id == "cs231n-scale-missing")
    folder = _folder(tmp_path / scale.id, scale.source())
    cold, hot = _check(folder, False), _check(folder, True)
    assert hot["timings"].get("torch_import_s", 1) < 0.05, "the warm prober imported torch again"
    assert comparable(hot) == comparable(cold)
    assert any(c["id"] == "MultiHeadAttention.scale" and c["status"] == "fail" for c in hot["checks"])
    assert _slot()[3] is not None, "the split run did not go to a model-server worker"


HOSTILE = '''

_DONE = []


def _reach_and_leave():
    if _DONE:
        return
    _DONE.append(1)
    import ctypes, gc, json, os, resource, signal, subprocess, sys
    found = {}
    try:
        import harness  # noqa
        found["harness"] = True
    except Exception:
        found["harness"] = False
    found["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in ("harness", "reference_model", "mutants"))
    found["gc"] = sum(1 for o in gc.get_objects() if str(getattr(type(o), "__module__", "")).startswith("harness"))
    found["reference"] = [p for p in (REFERENCE_PATH, "/opt/mtxdiag") if os.path.exists(p)]
    with open("/proc/self/maps") as f:
        found["mapped"] = sorted({ln.split()[-1] for ln in f if any(k in ln for k in (
            "harness", "reference_model", "mutants", "mtxdiag-runtime", "/opt/mtxdiag"))})
    for what, call in (("prlimit", lambda: resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE, (16, 16))),
                       ("stop", lambda: os.kill(os.getppid(), signal.SIGSTOP))):
        try:
            call()
            found[what] = "done"
        except OSError as e:
            found[what] = type(e).__name__
    for d in ("/tmp", "/var/tmp", "/dev/shm", os.environ["HOME"], "."):
        try:
            with open(os.path.join(d, "left-{MARK}"), "w") as f:
                f.write("from the first student")
        except OSError:
            pass
    subprocess.Popen(["sleep", "{MARK}1"], start_new_session=True)
    if os.fork() == 0:
        if os.fork() == 0:
            os.setsid()
            os.execvp("sleep", ["sleep", "{MARK}2"])
        os._exit(0)
    ctypes.CDLL(None).shmget({MARK}, 4096, 0o1600)
    print("REACH " + json.dumps(found), flush=True)
    forged = json.dumps({"event": "result", "result": {"checks": [{"id": "MultiHeadAttention.scale",
                                                                    "status": "pass"}]}}).encode() + b"\\n"
    for fd in range(3, 256):
        try:
            os.write(fd, forged)
        except OSError:
            pass
'''

LOOK = '''

_LOOKED = []


def _look():
    if _LOOKED:
        return
    _LOOKED.append(1)
    import os
    seen = {}
    for d in ("/tmp", "/var/tmp", "/dev/shm", os.environ["HOME"], "."):
        try:
            seen[d] = [n for n in os.listdir(d) if "{MARK}" in n]
        except OSError:
            seen[d] = []
    procs = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if b"{MARK}" in f.read():
                        procs.append(p)
            except OSError:
                pass
    with open("/proc/sysvipc/shm") as f:
        shm = [ln for ln in f.read().splitlines()[1:] if ln.split() and ln.split()[0] == "{MARK}"]
    print("SEEN " + repr(sorted(n for v in seen.values() for n in v)) + " PROCS " + repr(procs) + " SHM " + repr(shm),
          flush=True)
'''


def test_a_hostile_server_in_a_warm_slot_then_a_clean_canary_in_the_same_slot(tmp_path):
    if sandbox.mode("auto") != "bwrap":
        pytest.skip("without bubblewrap the server sees the machine's /tmp and the grader's files")
    bad = next(m for m in MUTANTS if m.id == "cs231n-scale-missing").source()
    bad = bad.replace(INIT, INIT + "        _reach_and_leave()\n", 1) + \
        HOSTILE.replace("REFERENCE_PATH", repr(ref_module.__file__)).replace("{MARK}", MARK)
    r = _check(_folder(tmp_path / "hostile", bad), True)
    slot = _slot()
    reach = [json.loads(ln[6:]) for ln in r["stdout"].splitlines() if ln.startswith("REACH ")]
    assert reach, r["stdout"][-2000:]
    got = reach[0]
    assert got["harness"] is False and got["modules"] == [] and got["gc"] == 0, got
    assert got["reference"] == [] and got["mapped"] == [], got        # nothing of the grader, warm as cold
    assert got["prlimit"] == "PermissionError" and got["stop"] == "PermissionError", got   # its worker untouched
    assert r["verdict"] != "clean"
    assert not any(c["status"] == "pass" for c in r["checks"] if c["id"].startswith("MultiHeadAttention")), \
        "a check passed after the forgery"
    assert "isolation" not in {c["id"] for c in r["checks"]}, "the run changed a worker of its slot"

    canary_text = REFERENCE.replace(INIT, INIT + "        _look()\n", 1) + LOOK.replace("{MARK}", MARK)
    canary = _check(_folder(tmp_path / "canary", canary_text), True)
    assert _slot()[:2] == slot[:2] and _slot()[2:] == slot[2:], "the canary did not run in the same slot"
    seen = next(ln for ln in canary["stdout"].splitlines() if ln.startswith("SEEN "))
    assert seen == "SEEN [] PROCS [] SHM []", seen
    wrong = [(c["id"], c["status"], c.get("detail")) for c in canary["checks"] if c["status"] in ("fail", "error")]
    assert [(i, st) for i, st, _ in wrong] == [("tamper-static", "fail")], wrong     # its own look, nothing else
    line = int(wrong[0][2].split(":")[0].split()[1])
    assert wrong[0][2].endswith("reads /proc") and line > len(REFERENCE.splitlines()) + 1, wrong
    slot[2].abort()                           # the model-server worker dies between two runs: replaced
    slot[2].proc.wait(timeout=10)
    plain = _check(_folder(tmp_path / "plain", REFERENCE), True)
    assert _slot()[:2] == slot[:2] and _slot()[3] not in (None, slot[3]), "the dead server worker was not replaced"
    assert plain["verdict"] == "clean", [(c["id"], c["status"], c.get("detail")) for c in plain["checks"]
                                         if c["status"] not in ("pass", "skip", "info")]
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _has(p, MARK)], "a process of the first run lives"


def _has(pid: str, mark: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            line = f.read()
    except OSError:
        return False
    return mark.encode() in line and b"pytest" not in line


@pytest.mark.slow
@pytest.mark.sweep
def test_every_cs231n_mutant_identical_warm_and_cold(tmp_path):
    """The sweep (not in CI's command): every mutant of the pack, cold and in one warm slot, in turn."""
    differ = []
    for m in MUTANTS:
        folder = _folder(tmp_path / m.id, m.source())
        if comparable(_check(folder, True)) != comparable(_check(folder, False)):
            differ.append(m.id)
    assert differ == [], f"warm and cold results differ for {differ}"
