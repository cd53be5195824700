"""Hostile submissions (tests/hostile/): each ends in its own clear outcome, within its time limit, without
changing anyone else's result, and without a forged verdict or score being accepted.

The cases run in parallel (a few child processes at a time) as soon as the first test needs one; each test
then asserts on its case's result. bwrap-only guarantees (files outside the submission's folder, network)
are skipped with the reason when bubblewrap cannot run here; set MTXDIAG_REQUIRE_BWRAP=1 (CI) to make that a
failure instead.
"""
from __future__ import annotations

import concurrent.futures as cf
import csv
import json
import os
import random
import re
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import mutants
from harness.grading import rubric as rubric_mod
from harness.isolation import sandbox
from harness.api import check_file
from harness.runner import Limits

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = Path(__file__).resolve().parents[1] / "hostile"
REFERENCE = ROOT / "reference_model" / "reversal.py"
RUBRIC = ROOT / "harness" / "grading" / "rubric_default.toml"
MEMORY_MB = 3072
FAST = 20          # time limit (s) for the cases that must time out
SLOW_OK = 240      # time limit for the others: far above what they need, so only a hang would reach it
WORKERS = 3
MARK = str(random.randint(100000, 999999))      # sleep {MARK}N: findable processes of the orphan cases

BASES = {
    "contract-missing": "import torch\nimport torch.nn as nn\n",
    "broken-forward": None,   # the reference + a forward() that raises
}
BROKEN_FORWARD = '''

class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        raise NotImplementedError("forward is not written yet")
'''


@dataclass
class Case:
    file: str | None = None          # tests/hostile/<file>.py; None: base only
    base: str | None = None          # overrides the file's "# base:" line
    timeout: float = SLOW_OK
    quick: bool = True
    bwrap_only: bool = False         # would really read, write and delete outside its folder without the sandbox


CASES = {
    "syntax_error": Case("syntax_error"),
    "missing_module": Case("missing_module"),
    "definition_error": Case("definition_error"),
    "definition_loop": Case("definition_loop", timeout=FAST),
    "forward_loop": Case("forward_loop", timeout=FAST),
    "forward_slow": Case("forward_slow", timeout=FAST),
    "exit_load_sys": Case("exit_load_sys"),
    "exit_load_os": Case("exit_load_os"),
    "exit_forward_sys": Case("exit_forward_sys"),
    "exit_forward_os": Case("exit_forward_os"),
    "memory_load": Case("memory_load"),
    "memory_forward": Case("memory_forward"),
    "orphans": Case("orphans"),
    "orphans_timeout": Case("orphans_timeout", timeout=FAST),
    "print_flood": Case("print_flood"),
    "forged_stdout": Case("forged_stdout"),
    "forged_fds": Case("forged_fds"),
    "forged_channel": Case("forged_channel"),
    "forged_channel_continue": Case("forged_channel_continue"),
    "channel_closed": Case("channel_closed"),
    "monkeypatch_torch": Case("monkeypatch_torch"),
    "monkeypatch_compare": Case("monkeypatch_compare"),
    "monkeypatch_builtins": Case("monkeypatch_builtins"),
    "monkeypatch_harness": Case("monkeypatch_harness"),
    "monkeypatch_optimizer": Case("monkeypatch_optimizer"),
    "forbidden_ops": Case("forbidden_ops"),
    "forbidden_native": Case("forbidden_native"),
    "reference_cheat": Case("reference_cheat"),
    "fs_escape": Case("fs_escape", bwrap_only=True),
    "network": Case("network", bwrap_only=True),
    "wrong_type": Case("wrong_type"),
    "wrong_shape": Case("wrong_shape"),
    "nan_logits": Case("nan_logits"),
    "meta_device": Case("meta_device"),
    "lying_subclass": Case("lying_subclass"),
    "introspect": Case("introspect"),
    # the same bugs without the hostile part: what the hostile versions' verdicts and scores are compared to
    "baseline_softmax": Case(None, base="mutant:reversal-softmax-wrong-dim"),
    "baseline_causal": Case(None, base="mutant:reversal-causal-mask-missing"),
}
# Longest first, so that they overlap with the many short ones.
ORDER = ["forward_slow", "definition_loop", "forward_loop", "orphans_timeout", "monkeypatch_compare",
         "monkeypatch_torch", "forged_stdout", "baseline_softmax", "baseline_causal", "reference_cheat",
         "nan_logits", "wrong_shape"]


def bwrap_or_skip():
    if sandbox.mode() == "bwrap":
        return
    why = f"bubblewrap is not used here ({sandbox.unavailable_reason() or 'MTXDIAG_ISOLATE=none'}); " \
          "this guarantee needs it"
    if os.environ.get("MTXDIAG_REQUIRE_BWRAP") == "1":
        pytest.fail(why)
    pytest.skip(why)


def _base_of(text: str) -> str:
    m = re.search(r"^# base:\s*(\S+)", text, re.M)
    assert m, "every hostile file names its base"
    return m.group(1)


def _without_train(text: str) -> str:
    """The base without its train(): the training trace (the slowest quick probe) is skipped. These cases are
    about hostile code, not training, and the mutants used here are bugs of the model."""
    assert "\ndef train(" in text
    return text.replace("\ndef train(", "\ndef lesson_train(")


def build(name: str, env: dict, folder: Path) -> Path:
    """The submission file of a case: its base, then the hostile part, placeholders filled."""
    case = CASES.get(name) or Case(name)
    text = (HOSTILE / f"{case.file}.py").read_text() if case.file else ""
    base = case.base or _base_of(text)
    if base == "none":
        head = ""
    elif base == "reference":
        head = _without_train(REFERENCE.read_text()) + "\n\n"
    elif base == "broken-forward":
        head = _without_train(REFERENCE.read_text()) + BROKEN_FORWARD + "\n\n"
    elif base.startswith("mutant:"):
        head = _without_train(mutants.source(mutants.get(base.split(":", 1)[1]))) + "\n\n"
    else:
        head = BASES[base] + "\n\n"
    for k, v in env.items():
        text = text.replace("{{" + k + "}}", str(v))
    assert "{{" not in text, f"unfilled placeholder in {name}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(head + text)
    return path


class Listener(threading.Thread):
    """A TCP listener on the grader's machine: a sandboxed submission must never reach it."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.accepted = []

    def run(self):
        while True:
            try:
                conn, addr = self.sock.accept()
            except OSError:
                return
            self.accepted.append(addr)
            conn.close()


class Runs:
    """Every case needed by the selected tests, run a few at a time in the background."""

    def __init__(self, root: Path, env: dict):
        self.root, self.env = root, env
        self.pool = cf.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="hostile")
        self.futures: dict[str, cf.Future] = {}
        self.lock = threading.Lock()

    def submit(self, name: str):
        if CASES[name].bwrap_only and sandbox.mode() != "bwrap":
            return                   # never run a case that escapes when nothing contains it
        with self.lock:
            if name not in self.futures:
                self.futures[name] = self.pool.submit(self._run, name)

    def _run(self, name):
        case = CASES[name]
        path = build(name, self.env, self.root / "students" / name)
        t = time.monotonic()
        # cores=2, as `check` runs on two cores: the training checks run in a second process (child_side.py)
        result = check_file(path, quick=case.quick, limits=Limits(timeout_s=case.timeout, memory_mb=MEMORY_MB,
                                                                  cores=2))
        return result, time.monotonic() - t

    def get(self, name: str):
        self.submit(name)
        return self.futures[name].result()


def uses(*names):
    def mark(fn):
        fn._hostile_cases = names
        return fn
    return mark


@pytest.fixture(scope="session")
def world(tmp_path_factory):
    """Other students' files, an output folder with a sentinel, a listener, and the placeholders."""
    root = tmp_path_factory.mktemp("hostile")
    other = root / "other_student"
    other.mkdir()
    secret = other / "secret_solution.py"
    secret.write_text("SECRET-OF-ANOTHER-STUDENT = 42\n")
    out = root / "out"
    out.mkdir()
    (out / "sentinel.txt").write_text("grader output\n")
    listener = Listener()
    listener.start()
    env = {"MARK": MARK, "OTHER": other, "SECRET": secret, "RUBRIC": RUBRIC, "REPO": ROOT, "OUT": out, "ROOT": root,
           "PORT": listener.port}
    yield {"root": root, "other": other, "secret": secret, "out": out, "listener": listener, "env": env}
    listener.sock.close()


@pytest.fixture(scope="session")
def runs(world, request):
    r = Runs(world["root"], world["env"])
    wanted = []
    for item in request.session.items:
        wanted += getattr(getattr(item, "function", None), "_hostile_cases", ())
    for name in sorted(set(wanted), key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n)):
        r.submit(name)
    yield r
    r.pool.shutdown(wait=True)


# ---------------------------------------------------------------------------- helpers

def causes(result) -> list[str]:
    return [d["id"] for d in result["diagnoses"]]


def check_of(result, cid):
    return next((c for c in result["checks"] if c["id"] == cid), None)


def line_of(runs, name: str, code: str) -> int:
    """The line of the built submission `name` that holds `code` (the student's line a finding must name)."""
    text = (runs.root / "students" / name / f"{name}.py").read_text().splitlines()
    return next(i for i, ln in enumerate(text, 1) if code in ln)


def assert_names_line(result, what: str, line: int):
    """The tamper finding about `what` names the student's line that made the change."""
    changed = check_of(result, "tamper")["data"]["changed"]
    hit = [c for c in changed if what in c]
    assert hit and any(f" at line {line}" in c for c in hit), (what, line, changed)


def tamper_cause_ids() -> set:
    """The cause every tampering finding must produce (harness/causes/tampering.py, wired into RULES)."""
    from harness import causes as causes_pkg
    names = {m.__name__.rsplit(".", 1)[-1] for m in causes_pkg.RULES}
    assert "tampering" in names, "harness/causes/tampering.py must be listed in harness.causes.RULES"
    return {"tampering"}


def assert_tampering(result, *check_ids):
    ids = set(causes(result))
    assert ids & tamper_cause_ids(), (causes(result), [c["id"] for c in result["checks"]])
    for cid in check_ids:
        c = check_of(result, cid)
        assert c is not None and c["status"] == "fail", (cid, [(x["id"], x["status"]) for x in result["checks"]])


def score(result) -> float:
    return rubric_mod.score(result, rubric_mod.load())["score"]


def text_of(result) -> str:
    return json.dumps(result["diagnoses"]) + json.dumps(result.get("error"))


def assert_no_grader_fault(result):
    assert "grader-fault" not in causes(result), result["diagnoses"]
    assert (result.get("error") or {}).get("student_fault") is not False


def alive_with(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker in cmd and state != "Z":
                found.append(f"{pid}: {cmd}")
    return found


# ---------------------------------------------------------------------------- the file does not load

@uses("syntax_error")
def test_syntax_error(runs):
    r, s = runs.get("syntax_error")
    assert r["verdict"] == "problems" and causes(r) == ["syntax-error"]
    assert r["diagnoses"][0]["location"]["line"] == 7
    assert s < 60


@uses("missing_module")
def test_missing_module(runs):
    r, s = runs.get("missing_module")
    assert r["verdict"] == "problems" and causes(r) == ["missing-module"]
    assert "mtxdiag_no_such_module_xyz" in text_of(r)


@uses("definition_error")
def test_exception_at_definition_time(runs):
    r, s = runs.get("definition_error")
    assert r["verdict"] == "problems" and causes(r) == ["definition-error"]
    assert "boom while the class body runs" in text_of(r)
    assert r["diagnoses"][0]["location"]["line"] > 200   # the line in the student's file


@uses("exit_load_sys")
def test_sys_exit_while_loading(runs):
    r, s = runs.get("exit_load_sys")
    assert r["verdict"] == "problems" and causes(r) == ["exit-during-load"]


@uses("exit_load_os")
def test_os_exit_while_loading(runs):
    r, s = runs.get("exit_load_os")
    assert r["verdict"] == "error" and causes(r) == ["crashed"]
    assert r["error"]["student_fault"] is True
    assert "before sending a result" in r["error"]["reason"] and "'load'" in r["error"]["reason"]


@uses("memory_load")
def test_memory_while_loading(runs):
    r, s = runs.get("memory_load")
    assert r["verdict"] == "error" and causes(r) == ["memory-limit"], (causes(r), r["error"])
    assert f"{MEMORY_MB} MB" in r["error"]["reason"]
    assert s < 90


@uses("reference_cheat")
def test_submitting_the_reference_solution_is_tampering(runs):
    r, s = runs.get("reference_cheat")
    assert r["verdict"] == "problems"
    assert_tampering(r, "tamper-static", "tamper")
    assert "reference solution" in check_of(r, "tamper-static")["detail"]
    assert "reference_model.reversal" in check_of(r, "tamper")["detail"]
    assert score(r) == 0


# ---------------------------------------------------------------------------- time limits

@uses("definition_loop")
def test_infinite_loop_while_loading(runs):
    r, s = runs.get("definition_loop")
    assert r["verdict"] == "error" and causes(r) == ["timeout"]
    assert "'load'" in r["error"]["reason"]
    assert r["diagnoses"][0]["location"]["line"] > 200   # the stuck line, from the stack dump
    assert s < FAST + 20


@uses("forward_loop")
def test_infinite_loop_in_forward(runs):
    r, s = runs.get("forward_loop")
    assert r["verdict"] == "error" and causes(r) == ["timeout"]
    assert r["error"]["phase"] not in (None, "load")
    assert r["diagnoses"][0]["location"]["line"] > 200
    assert s < FAST + 20


@uses("forward_slow")
def test_ten_seconds_per_forward(runs):
    r, s = runs.get("forward_slow")
    assert r["verdict"] == "error" and causes(r) == ["timeout"]
    assert f"{FAST} s" in r["error"]["reason"]
    assert s < FAST + 20


# ---------------------------------------------------------------------------- exits, memory, crashes in forward

@uses("exit_forward_sys")
def test_sys_exit_in_forward(runs):
    r, s = runs.get("exit_forward_sys")
    assert r["verdict"] == "problems" and "forward-error" in causes(r)
    assert "SystemExit" in text_of(r)
    assert_no_grader_fault(r)


@uses("exit_forward_os")
def test_os_exit_in_forward(runs):
    r, s = runs.get("exit_forward_os")
    assert r["verdict"] == "error" and causes(r) == ["crashed"]
    assert "before sending a result" in r["error"]["reason"] and r["error"]["phase"] not in (None, "load")


@uses("memory_forward")
def test_memory_in_forward(runs):
    r, s = runs.get("memory_forward")
    assert r["verdict"] == "error" and causes(r) == ["memory-limit"], (causes(r), r["error"])


# ---------------------------------------------------------------------------- processes

@uses("orphans")
def test_processes_that_outlive_the_check_are_killed(runs):
    r, s = runs.get("orphans")
    assert r["verdict"] == "problems" and causes(r)[:1] == ["missing-name"] and set(causes(r)[1:]) <= {"forbidden-operation"}
    assert [p for n in "123" for p in alive_with(f"sleep {MARK}{n}")] == []


@uses("orphans_timeout")
def test_processes_are_killed_with_a_timed_out_check(runs):
    r, s = runs.get("orphans_timeout")
    assert r["verdict"] == "error" and causes(r) == ["timeout"]
    assert [p for n in "456" for p in alive_with(f"sleep {MARK}{n}")] == []
    assert s < FAST + 20


# ---------------------------------------------------------------------------- output and forged results

@uses("print_flood")
def test_printing_50_mb(runs):
    r, s = runs.get("print_flood")
    assert r["verdict"] == "problems" and causes(r)[:1] == ["missing-name"] and set(causes(r)[1:]) <= {"forbidden-operation"}
    assert len(r["stdout"]) < 1_000_000 and len(r["stderr"]) < 1_000_000
    assert "more characters not kept" in r["stdout"] or "more bytes not kept" in r["stdout"]


@uses("forged_stdout", "baseline_softmax")
def test_forged_result_on_stdout_changes_nothing(runs):
    r, _ = runs.get("forged_stdout")
    base, _ = runs.get("baseline_softmax")
    assert base["verdict"] == "problems" and "softmax-wrong-dim" in causes(base)
    assert r["verdict"] == "problems" and causes(r) == causes(base)
    assert score(r) == score(base) < 100
    assert "clean" in r["stdout"]       # the forgery is shown as what it is: the student's output


@uses("forged_fds")
def test_forged_lines_on_descriptors_3_to_20(runs):
    r, s = runs.get("forged_fds")
    assert r["verdict"] == "problems" and causes(r)[:1] == ["missing-name"] and set(causes(r)[1:]) <= {"forbidden-operation"}
    assert score(r) == 0


@uses("forged_channel")
def test_forged_result_on_the_result_channel_then_exit(runs):
    r, s = runs.get("forged_channel")
    assert r["verdict"] == "problems"
    assert_tampering(r, "result-channel")
    assert "did not come from the grader" in check_of(r, "result-channel")["detail"]
    assert score(r) == 0


@uses("forged_channel_continue")
def test_garbage_on_the_result_channel_keeps_the_real_result(runs):
    r, s = runs.get("forged_channel_continue")
    assert r["verdict"] == "problems"
    assert_tampering(r, "result-channel")
    assert "forward-error" in causes(r)     # the real checks still ran and count
    assert score(r) == 0


@uses("channel_closed")
def test_closing_the_result_channel(runs):
    r, s = runs.get("channel_closed")
    assert r["verdict"] == "problems"
    assert_tampering(r, "result-channel")
    assert "closed or replaced" in check_of(r, "result-channel")["detail"]
    assert score(r) == 0


# ---------------------------------------------------------------------------- monkeypatching

@uses("monkeypatch_torch", "baseline_softmax")
def test_tampered_torch_functions_change_nothing(runs):
    r, _ = runs.get("monkeypatch_torch")
    base, _ = runs.get("baseline_softmax")
    assert r["verdict"] == "problems"
    assert "softmax-wrong-dim" in causes(r)             # the bug is still found: the originals were put back
    assert_tampering(r, "tamper")
    changed = " ".join(check_of(r, "tamper")["data"]["changed"])
    for name in ("torch.softmax", "torch.nn.functional.softmax", "torch.nn.functional.cross_entropy",
                 "torch.Tensor.softmax"):
        assert name in changed
    assert_names_line(r, "torch.Tensor.softmax", line_of(runs, "monkeypatch_torch", "torch.Tensor.softmax = "))
    assert score(r) <= score(base) and score(r) == 0


@uses("monkeypatch_compare", "baseline_causal")
def test_patched_comparisons_change_nothing(runs):
    r, _ = runs.get("monkeypatch_compare")
    base, _ = runs.get("baseline_causal")
    assert base["verdict"] == "problems" and "causal-mask-missing" in causes(base)
    assert r["verdict"] == "problems"
    assert "causal-mask-missing" in causes(r)
    assert_tampering(r, "tamper")
    changed = " ".join(check_of(r, "tamper")["data"]["changed"])
    for name in ("torch.allclose", "torch.isfinite", "torch.Tensor.__eq__", "torch.Tensor.abs", "torch.Tensor.max"):
        assert name in changed
    assert any("during model(src, tgt_in)" in c or "during " in c for c in check_of(r, "tamper")["data"]["changed"])
    assert_names_line(r, "torch.allclose", line_of(runs, "monkeypatch_compare", "torch.allclose = "))
    assert_names_line(r, "torch.Tensor.max", line_of(runs, "monkeypatch_compare", "torch.Tensor.max = "))
    assert check_of(r, "tamper")["location"]["line"] == line_of(runs, "monkeypatch_compare", "torch.allclose = ")
    assert score(r) <= score(base)


@uses("monkeypatch_optimizer")
def test_torch_style_wrappers_from_the_students_file_are_tampering(runs):
    """What torch does itself (wrapping Optimizer.step, manual_seed) is the student's doing from their file."""
    r, _ = runs.get("monkeypatch_optimizer")
    assert_tampering(r, "tamper")
    assert_names_line(r, "torch.optim.Adam.step", line_of(runs, "monkeypatch_optimizer", "torch.optim.Adam.step = "))
    assert_names_line(r, "torch.manual_seed", line_of(runs, "monkeypatch_optimizer", "torch.manual_seed = "))
    assert_names_line(r, "torch.optim.AdamW.step", line_of(runs, "monkeypatch_optimizer", '"st" + "ep"'))


@uses("monkeypatch_builtins")
def test_patched_builtins(runs):
    r, s = runs.get("monkeypatch_builtins")
    assert r["verdict"] == "problems"
    assert "forward-error" in causes(r)
    assert_tampering(r, "tamper")
    changed = " ".join(check_of(r, "tamper")["data"]["changed"])
    for name in ("builtins.isinstance", "builtins.float", "builtins.len", "builtins.hasattr"):
        assert name in changed
    assert_names_line(r, "builtins.len", line_of(runs, "monkeypatch_builtins", "_b.len = "))
    assert_no_grader_fault(r)


@uses("monkeypatch_harness")
def test_patched_harness(runs):
    r, s = runs.get("monkeypatch_harness")
    assert r["verdict"] == "problems"
    assert "forward-error" in causes(r)                 # the real probes ran, not the student's
    assert_tampering(r, "tamper", "tamper-static")
    changed = " ".join(check_of(r, "tamper")["data"]["changed"])
    assert "harness.child.probes.base.check" in changed and "PROBES[0]" in changed
    assert_names_line(r, "harness.child.probes.base.check", line_of(runs, "monkeypatch_harness", "_hb.check = "))
    assert_names_line(r, "PROBES[0]", line_of(runs, "monkeypatch_harness", "object.__setattr__(_p"))
    assert score(r) == 0


# ---------------------------------------------------------------------------- audited operations

def attempts_of(result) -> list[dict]:
    c = check_of(result, "forbidden-ops")
    assert c is not None and c["status"] == "fail", [(x["id"], x["status"]) for x in result["checks"]]
    return c["data"]["attempts"]


def assert_attempt(runs, result, name: str, op: str, where: str):
    """An attempt of `op` is reported at the line marked `# OP <op> <where>` in the built submission."""
    line = line_of(runs, name, f"# OP {op} {where}")
    found = [(a["op"], a["line"]) for a in attempts_of(result)]
    assert (op, line) in found, (op, where, line, found)


@uses("forbidden_ops")
def test_forbidden_operations_are_reported_with_their_lines(runs):
    r, _ = runs.get("forbidden_ops")
    assert "forbidden-operation" in causes(r), causes(r)
    for op, where in [("connect", "load"), ("read", "load"), ("list", "load"), ("subprocess", "load"),
                      ("write", "init"), ("delete", "init"), ("os.system", "init"),
                      ("connect", "forward"), ("read", "forward"), ("os.fork", "forward"), ("os.kill", "forward")]:
        assert_attempt(runs, r, "forbidden_ops", op, where)
    by_op = {a["op"]: a for a in attempts_of(r)}
    assert by_op["read"]["target"].endswith("secret_solution.py")
    assert by_op["connect"]["target"] == "127.0.0.1:9"
    if sandbox.mode() == "bwrap":       # what the sandbox stopped, it says so
        assert by_op["read"]["blocked"] is True and by_op["connect"]["blocked"] is True
    # an integrity flag, not a bug: the correct model keeps its verdict's substance and (default rubric) score
    assert causes(r) == ["forbidden-operation"], causes(r)
    assert score(r) == 100
    d = next(d for d in r["diagnoses"] if d["id"] == "forbidden-operation")
    assert d["location"]["line"] == line_of(runs, "forbidden_ops", "# OP connect load")


@uses("forbidden_native")
def test_native_code_and_sys_modules_are_reported(runs):
    r, _ = runs.get("forbidden_native")
    assert "forbidden-operation" in causes(r) and "tampering" in causes(r)
    assert_attempt(runs, r, "forbidden_native", "ctypes", "load")
    assert_attempt(runs, r, "forbidden_native", "sys.modules", "load")


@uses("print_flood")
def test_output_flood_is_a_finding(runs):
    r, _ = runs.get("print_flood")
    c = check_of(r, "output-flood")
    assert c is not None and c["status"] == "fail" and c["measured"] >= 150_000_000, c


def test_lesson_code_has_no_forbidden_operation():
    lesson = ROOT / "submissions" / "reversal_lesson.py"
    r = check_file(lesson, quick=True, limits=Limits(timeout_s=SLOW_OK, memory_mb=MEMORY_MB))
    assert r["verdict"] == "clean", causes(r)
    assert check_of(r, "forbidden-ops") is None and check_of(r, "output-flood") is None


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted((ROOT / "tests" / "fixtures" / "correct").glob("*.py")) +
                         sorted((ROOT / "tests" / "fixtures" / "correct").glob("*.ipynb")) +
                         [ROOT / "submissions" / "reversal_lesson.ipynb", ROOT / "submissions" / "block_lesson.py"],
                         ids=lambda p: p.name)
def test_correct_code_has_no_forbidden_operation(path):
    r = check_file(path, quick=False, limits=Limits(timeout_s=SLOW_OK, memory_mb=MEMORY_MB))
    assert check_of(r, "forbidden-ops") is None, check_of(r, "forbidden-ops")
    assert "forbidden-operation" not in causes(r)


@pytest.mark.slow
def test_mutants_have_no_forbidden_operation(tmp_path):
    ids = [m.id for m in mutants.MUTANTS]
    paths = []
    for mid in ids:
        p = tmp_path / f"{mid}.py"
        p.write_text(mutants.source(mutants.get(mid)))
        paths.append(p)
    with cf.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda p: check_file(p, quick=True, limits=Limits(timeout_s=SLOW_OK,
                                                                                   memory_mb=MEMORY_MB)), paths))
    flagged = [(p.stem, check_of(r, "forbidden-ops")["detail"]) for p, r in zip(paths, results)
               if check_of(r, "forbidden-ops")]
    assert flagged == []


# ---------------------------------------------------------------------------- what forward() returns

@uses("wrong_type")
def test_forward_returns_a_string(runs):
    r, s = runs.get("wrong_type")
    assert r["verdict"] == "problems" and "forward-error" in causes(r)
    assert "expected a tensor of logits" in text_of(r)
    assert_no_grader_fault(r)


@uses("wrong_shape")
def test_forward_returns_the_wrong_shape(runs):
    r, s = runs.get("wrong_shape")
    assert r["verdict"] == "problems"
    assert check_of(r, "shapes")["status"] == "fail"
    assert_no_grader_fault(r)


@uses("nan_logits")
def test_forward_returns_nan(runs):
    r, s = runs.get("nan_logits")
    assert r["verdict"] == "problems"
    assert_no_grader_fault(r)


@uses("meta_device")
def test_forward_returns_a_meta_tensor(runs):
    r, s = runs.get("meta_device")
    assert r["verdict"] == "problems" and "forward-error" in causes(r)
    assert "device 'meta'" in text_of(r)
    assert_no_grader_fault(r)


@uses("lying_subclass")
def test_forward_returns_a_lying_tensor_subclass(runs):
    r, s = runs.get("lying_subclass")
    assert r["verdict"] == "problems" and "forward-error" in causes(r)
    assert "_Liar (a subclass of torch.Tensor)" in text_of(r)
    assert "defines __torch_function__" in check_of(r, "tamper-static")["detail"]
    assert score(r) == 0


# ---------------------------------------------------------------------------- the child's surroundings

@uses("introspect")
def test_limits_environment_and_folder(runs, monkeypatch):
    r, s = runs.get("introspect")
    lines = {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in r["stdout"].splitlines() if " " in ln}
    limits = json.loads(lines["LIMITS"])
    assert limits["RLIMIT_CORE"] == [0, 0]                                    # no core dumps
    assert limits["RLIMIT_AS"] == [MEMORY_MB * 2 ** 20] * 2
    assert limits["RLIMIT_FSIZE"] == [Limits().file_mb * 2 ** 20] * 2
    assert limits["RLIMIT_NOFILE"] == [Limits().open_files] * 2
    env = json.loads(lines["ENV"])
    assert set(env) <= {"PATH", "LANG", "LC_ALL", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "CUDA_VISIBLE_DEVICES",
                        "SYSTEMROOT", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONSAFEPATH", "PYTHONHASHSEED",
                        "MPLBACKEND", "HOME", "TMPDIR", "PYTHONNOUSERSITE", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                        "PWD", sandbox.TOKEN_VAR, "TORCHINDUCTOR_CACHE_DIR"}, env
    assert ROOT.as_posix() not in env["PYTHONPATH"] or sandbox.mode() == "none"
    cwd, listing = json.loads(lines["CWD"])
    # set by torch itself in the child (importing torch._dynamo), from its TMPDIR: the run's own folder
    assert env.get("TORCHINDUCTOR_CACHE_DIR", cwd).startswith(cwd), env
    # only its own copy (and torch's cache folder, which importing torch._dynamo makes in the run's TMPDIR)
    assert [n for n in listing if not n.startswith("torchinductor_")] == ["stack.txt", "submission.py"]
    assert env["HOME"] == cwd
    assert cwd not in json.loads(lines["SYSPATH"]) and "" not in json.loads(lines["SYSPATH"])
    argv = json.loads(lines["ARGV"])
    passed_fd = int(argv[argv.index("--result-fd") + 1])
    assert passed_fd not in json.loads(lines["FDS"])                     # the channel moved away
    assert json.loads(lines["STDIN"]) == ""                              # the run's key is gone


def test_stdin_is_empty_after_the_key_even_where_devnull_is_a_file(tmp_path):
    """CI once ran on a machine whose /dev/null had become a regular file holding what other processes wrote
    to it (pytest's log lines): a child that reopened /dev/null as its stdin let the student read them."""
    import subprocess
    import sys
    junk = tmp_path / "devnull"
    junk.write_text("OTHER-PROCESSES-OUTPUT\n")
    code = ("import os, sys; os.devnull = sys.argv[1]\n"
            "from harness.child.main import _read_key\n"
            "key = _read_key(True)\n"
            "print(repr(key), repr(sys.stdin.read()), repr(os.read(0, 100)))\n")
    out = subprocess.run([sys.executable, "-c", code, str(junk)], input=b"the-key\nREST-OF-THE-PIPE",
                         capture_output=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().split() == ["'the-key'", "''", "b''"]


def test_environment_is_scrubbed(tmp_path, monkeypatch):
    monkeypatch.setenv("MTXDIAG_TEST_SECRET", "hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter3")
    path = build("introspect", {}, tmp_path)
    r = check_file(path, quick=True, limits=Limits(timeout_s=SLOW_OK, memory_mb=MEMORY_MB))
    assert "hunter2" not in r["stdout"] and "hunter3" not in r["stdout"]
    assert "MTXDIAG_TEST_SECRET" not in r["stdout"]


@uses("fs_escape")
def test_files_outside_the_submission_are_invisible(runs, world):
    bwrap_or_skip()
    r, s = runs.get("fs_escape")
    out = r["stdout"]
    assert r["verdict"] == "problems" and causes(r)[:1] == ["missing-name"] and set(causes(r)[1:]) <= {"forbidden-operation"}
    assert "READ-OK" not in out and "WRITE-OK" not in out and "DELETE-OK" not in out, out
    assert out.count("READ-REFUSED") == 7 and out.count("WRITE-REFUSED") == 3 and out.count("DELETE-REFUSED") == 2
    assert f"LIST-OK {world['other']}" not in out and f"LIST-OK {world['out']}" not in out, out
    # A parent of the Python installation may exist (as an empty path to it), never with its contents.
    listed = "\n".join(ln for ln in out.splitlines() if ln.startswith("LIST-OK"))
    for leak in ("secret_solution", "pyproject.toml", "sentinel", "'harness'", "'submissions'"):
        assert leak not in listed, (leak, listed)
    assert "SECRET-OF-ANOTHER-STUDENT" not in out and "max_score" not in out
    assert world["secret"].read_text().startswith("SECRET-OF-ANOTHER-STUDENT")
    assert (world["out"] / "sentinel.txt").exists() and not (world["out"] / "forged.json").exists()
    assert not (world["other"] / "evil.py").exists() and not (ROOT / "harness" / "evil.py").exists()
    tmp_listing = re.search(r"^TMP (.*)$", out, re.M).group(1)
    assert world["other"].name not in tmp_listing and "pytest" not in tmp_listing


@uses("network")
def test_network_is_refused(runs, world):
    bwrap_or_skip()
    r, s = runs.get("network")
    assert "CONNECT-OK" not in r["stdout"] and r["stdout"].count("CONNECT-REFUSED") == 2, r["stdout"]
    assert world["listener"].accepted == []


def test_sandbox_is_detected_and_cached(monkeypatch):
    monkeypatch.delenv("MTXDIAG_ISOLATE", raising=False)
    first = sandbox.available()
    assert sandbox.available() is first
    assert sandbox.mode("none") == "none"
    if first:
        assert sandbox.mode("auto") == "bwrap" == sandbox.mode("bwrap")
        assert sandbox.unavailable_reason() == ""
    else:
        with pytest.raises(RuntimeError):
            sandbox.mode("bwrap")


# ---------------------------------------------------------------------------- a batch

GRADE_BATCH = ["syntax_error", "exit_load_os", "orphans", "forged_channel", "monkeypatch_harness", "fs_escape",
               "print_flood", "forward_slow", "forbidden_ops"]


@pytest.mark.slow
def test_batch_grading_isolates_students(world, tmp_path):
    """grade: the reference among hostile submissions keeps its clean verdict and full score; each hostile
    one gets its own row and outcome; the batch finishes; nothing is written outside the output folder."""
    grade = pytest.importorskip("harness.grading.grade")
    src = tmp_path / "submissions"
    src.mkdir()
    out = tmp_path / "gradebook"
    mark = str(int(MARK) + 1)
    env = dict(world["env"], OUT=out, MARK=mark)
    (src / "reference.py").write_text(REFERENCE.read_text())
    batch = [n for n in GRADE_BATCH if not CASES[n].bwrap_only or sandbox.mode() == "bwrap"]
    for name in batch:
        build(name, env, src / name)
    t = time.monotonic()
    summary = grade.grade_folder(src, out, options=grade.Options(quick=True, timeout_s=45, memory_mb=MEMORY_MB,
                                                                  jobs=3), progress=False)
    took = time.monotonic() - t
    assert summary.total == len(batch) + 1 and not summary.grader_faults and not summary.interrupted
    results = {p.parent.name: json.loads(p.read_text()) for p in (out / "students").glob("*/result.json")}
    assert set(results) == set(batch) | {"reference"}
    ref = results["reference"]
    assert ref["verdict"] == "clean" and ref["diagnoses"] == [] and ref["grade"]["score"] == ref["grade"]["max_score"]
    assert not any(c["id"] in ("tamper", "tamper-static", "result-channel") for c in ref["checks"])
    expected = {"syntax_error": ("problems", "syntax-error"), "exit_load_os": ("error", "crashed"),
                "orphans": ("problems", "missing-name"), "forged_channel": ("problems", None),
                "monkeypatch_harness": ("problems", None), "fs_escape": ("problems", "missing-name"),
                "print_flood": ("problems", "missing-name"), "forward_slow": ("error", "timeout"),
                "forbidden_ops": ("problems", "forbidden-operation")}
    for name, (verdict, cause) in expected.items():
        if name not in batch:
            continue
        res = results[name]
        assert res["verdict"] == verdict, (name, res["verdict"], causes(res))
        if cause:
            assert causes(res)[0] == cause, (name, causes(res))
        else:
            assert set(causes(res)) & tamper_cause_ids(), (name, causes(res))
        if name != "forbidden_ops":     # an integrity flag: the default rubric lets a correct model's score stand
            assert res["grade"]["score"] == 0, (name, res["grade"])
    assert results["forbidden_ops"]["grade"]["score"] == 100
    with open(out / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(batch) + 1
    integrity = {r["student"]: r["integrity"] for r in rows}
    assert integrity["reference"] == "" and integrity["forbidden_ops"].startswith("forbidden: ")
    assert integrity["print_flood"] == "output flood" and integrity["monkeypatch_harness"].startswith("tampering")
    assert (out / "students" / "forbidden_ops" / "report.html").exists()
    assert "Integrity</button>" in (out / "index.html").read_text()
    assert alive_with(f"sleep {mark}") == []
    if sandbox.mode() == "bwrap":
        assert not (out / "forged.json").exists()
        assert world["secret"].exists() and not (world["other"] / "evil.py").exists()
    assert took < 45 * 3 + 60
