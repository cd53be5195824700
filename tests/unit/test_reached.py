"""reached.py (which of the student's functions each probe ran) and the re-check it narrows (repair/verify.py)."""
from __future__ import annotations

import ast
import sys
import traceback
import types

from harness import reached
from harness.repair import verify

SRC = '''\
import math


def scale(x):
    """Doc stays."""
    return x / math.sqrt(4)


class Block:
    size = 3

    def forward(self, x):
        def inner(y):
            return y + 1
        return inner(scale(x))

    def broken(self):
        return 1 / 0


def train(steps):
    total = 0
    for i in range(steps):
        total += i
    return total


def gen():
    yield 1
'''


def _load(on: bool, path="student.py"):
    r = reached.Reach(on)
    code = r.compile(ast.parse(SRC), path)
    mod = types.ModuleType("student")
    with r.during(reached.LOAD):
        exec(code, mod.__dict__)
    return r, mod


def _fn(r, name_line: int) -> int:
    """The number of the function whose body starts right after line `name_line` (its def)."""
    return next(int(k) for k, (a, _) in r.record()["functions"].items() if a == name_line + 1)


def test_each_probe_records_the_functions_it_called_and_nothing_else_changes():
    r, mod = _load(True)
    with r.during("forward"):
        assert mod.Block().forward(4.0) == 3.0
    with r.during("train"):
        assert mod.train(4) == 6
    with r.during("gen"):
        assert list(mod.gen()) == [1]
    assert mod.scale.__doc__ == "Doc stays." and mod.Block.size == 3
    fwd, inner, scale, train = _fn(r, 12), _fn(r, 13), _fn(r, 4), _fn(r, 21)
    assert set(r.by["forward"]) == {fwd, inner, scale}
    assert r.by["train"] == [train]
    assert r.by[reached.LOAD] == []                  # module and class bodies are not functions
    assert len(r.by["gen"]) == 1


def test_line_numbers_and_tracebacks_are_the_students():
    r, mod = _load(True)
    try:
        mod.Block().broken()
    except ZeroDivisionError:
        line = traceback.extract_tb(sys.exc_info()[2])[-1].lineno
    assert line == 18
    _, plain = _load(False)
    assert plain.train(3) == mod.train(3)


def test_off_records_nothing():
    r, mod = _load(False)
    with r.during("p"):
        mod.train(2)
    assert r.by == {} and r.spans == {}


def test_to_rerun_picks_the_probes_that_reached_the_edited_function():
    r, mod = _load(True)
    with r.during("forward"):
        mod.Block().forward(1.0)
    with r.during("train"):
        mod.train(1)
    cov = reached.clean(r.record())
    assert reached.to_rerun(cov, {23}, {"forward", "train"}) == {"train"}           # inside train()
    assert reached.to_rerun(cov, {6}, {"forward", "train"}) == {"forward"}          # scale(), via forward
    assert reached.to_rerun(cov, {14}, {"forward", "train"}) == {"forward"}         # the nested function
    assert reached.to_rerun(cov, {10}, {"forward", "train"}) is None                # a class body: everything
    assert reached.to_rerun(cov, {1}, {"forward", "train"}) is None                 # the top level
    assert reached.to_rerun(cov, {23}, {"forward", "train", "never-recorded"}) is None
    assert reached.to_rerun({}, {23}, {"train"}) is None


def test_a_function_run_while_loading_reruns_everything():
    r = reached.Reach(True)
    code = r.compile(ast.parse("def table():\n    return [1, 2]\n\n\nTABLE = table()\n"), "s.py")
    with r.during(reached.LOAD):
        exec(code, {})
    with r.during("p"):
        pass
    cov = reached.clean(r.record())
    assert reached.to_rerun(cov, {2}, {"p"}) is None


def test_clean_drops_what_is_not_a_record():
    assert reached.clean(None) == {} and reached.clean({"functions": [], "probes": {}}) == {}
    got = reached.clean({"functions": {"0": [3, 5], "x": [1, 2], "1": [1, True]},
                         "probes": {"p": [0, 1, "2", 7], 5: [0]}})
    assert got == {"functions": {"0": [3, 5]}, "probes": {"p": [0]}}


def test_edited_lines_of_a_replacement_an_insertion_and_a_removal():
    src = "a\nb\nc\nd\n"
    assert verify.edited_lines(src, "a\nB\nc\nd\n") == {2}
    assert verify.edited_lines(src, "a\nb\nnew\nc\nd\n") == {2, 3}
    assert verify.edited_lines(src, "a\nc\nd\n") == {2}


REPAIR_SRC = '''\
import torch


def attend(s):
    return torch.softmax(s, dim=1)


def train(model):
    return model
'''


def test_a_recheck_runs_only_the_probes_that_reached_the_edit():
    """softmax-wrong-dim at line 5 (inside attend): the probe that ran attend re-runs, the one that ran only
    train() is carried over and named."""
    fns = {"0": [5, 5], "1": [9, 9]}
    result = {"checks": [{"id": "attn-rows-sum", "status": "fail", "measured": 0.5},
                         {"id": "overfit", "status": "pass", "measured": 0.01},
                         {"id": "causal-leak", "status": "pass", "measured": 0.0}],
              "diagnoses": [{"id": "softmax-wrong-dim", "confidence": 0.9, "location": {"line": 5},
                             "evidence": ["attn-rows-sum: rows sum to 0.5"]}]}
    cov = {"functions": fns, "probes": {"attn-rows-sum": [0], "overfit": [1], "causal-leak": [0], "(load)": []}}
    calls = []

    def recheck(code, only, extra, gate=""):
        calls.append((only, extra))
        return {"attn-rows-sum": {"status": "pass", "measured": 0.0},
                "causal-leak": {"status": "pass", "measured": 0.0}, "contract": {"status": "pass"}}
    verify.repair(result, REPAIR_SRC, "m.py", recheck, 1, coverage=cov)
    rep = result["diagnoses"][0]["repair"]
    assert rep["verified"] and "dim=-1" in rep["diff"]
    assert calls == [("attn-rows-sum,causal-leak", "")]      # one run: the cited probe and the other one reached
    assert rep["carried"] == ["overfit"]
    calls.clear()
    result["diagnoses"][0].pop("repair")
    verify.repair(result, REPAIR_SRC, "m.py", recheck, 1)       # no record: the whole quick suite
    assert calls == [("", "attn-rows-sum")]


def test_a_probe_that_could_not_measure_and_now_reports_its_checks_is_no_change():
    before = {"structure": {"status": "skip"}, "causal-leak": {"status": "fail"}}
    after = {"distinct-layers": {"status": "pass"}, "ffn-nonlinear": {"status": "pass"},
             "causal-leak": {"status": "pass"}}
    assert verify.changed(before, after, ["causal-leak"], set()) == []
    after["distinct-layers"]["status"] = "fail"      # what it measures now fails: reported
    assert verify.changed(before, after, ["causal-leak"], set()) == ["distinct-layers: None -> fail",
                                                                      "structure: skip -> None"]


def test_the_summary_says_how_many_probes_were_carried_over():
    from harness.repair import show
    rep = {"verified": True, "found_by": "catalogue", "label": "dim=-1", "line": 5, "changes": ["a: 1 -> 0"],
           "carried": ["overfit", "decode"]}
    assert "2 probes that never ran the edited code not re-run" in show.summary(rep)
    assert "not re-run" not in show.summary(dict(rep, carried=[]))


def test_a_tree_the_instrumentation_cannot_compile_loads_plainly(monkeypatch):
    r = reached.Reach(True)
    monkeypatch.setattr(reached, "_swap", lambda *a: (_ for _ in ()).throw(ValueError("boom")))
    mod: dict = {}
    exec(r.compile(ast.parse(SRC), "s.py"), mod)
    assert mod["train"](3) == 3 and r.on is False and r.spans == {}
    with r.during("p"):
        mod["train"](1)
    assert r.by == {}


def test_a_usual_fix_that_removes_the_failure_but_moves_another_check_is_not_verified_nor_doubted():
    result = {"checks": [{"id": "attn-rows-sum", "status": "fail", "measured": 0.5},
                         {"id": "decode-batch-rows", "status": "pass", "measured": 0}],
              "diagnoses": [{"id": "softmax-wrong-dim", "confidence": 0.9, "location": {"line": 5},
                             "evidence": ["attn-rows-sum: rows sum to 0.5"]}]}

    def recheck(code, only, extra, gate=""):
        return {"attn-rows-sum": {"status": "pass", "measured": 0.0},
                "decode-batch-rows": {"status": "skip", "measured": None}}
    verify.repair(result, REPAIR_SRC, "m.py", recheck, 1)
    d = result["diagnoses"][0]
    assert not d["repair"]["verified"] and d["confidence"] == 0.9
    assert any("removed the failure but changed another check (decode-batch-rows: pass -> skip)" in e
               for e in d["evidence"])


def test_a_later_candidate_is_measured_in_the_suites_order_not_by_its_screen(monkeypatch):
    """A later candidate's cited probes run alone first (a screen); what verifies it is their run in the suite's
    order with the rest of what the edit reaches: a pass that only the screen saw (what the student's module
    keeps across probes can differ there) is not a repair."""
    from types import SimpleNamespace
    before = {"causal-leak": {"status": "fail", "measured": 0.2},
              "attn-rows-sum": {"status": "pass", "measured": 0.0}}
    monkeypatch.setattr(verify, "_recheck_plan", lambda *a: (["attn-rows-sum"], []))   # the edit reaches one more
    calls = []

    def recheck(code, only, extra, gate=""):       # the probes asked for, in the suite's order
        calls.append((code, only, gate))
        ran = only.split(",")
        alone = ran == ["causal-leak"]            # the screen: causal-leak without attn-rows-sum before it
        leak = "pass" if alone or code == "good" else "fail"
        out = {"causal-leak": {"status": leak, "measured": 0.0 if leak == "pass" else 0.2}} if "causal-leak" in ran \
            else {}
        if "attn-rows-sum" in ran:
            out["attn-rows-sum"] = {"status": "pass", "measured": 0.0}
        return out
    cands = [SimpleNamespace(code=x, label=x, kind="k", line=3) for x in ("first", "screen-only", "good")]
    tried, rejected = [], []
    r = verify._verify(iter(cands), "src", "m.py", before, ["causal-leak"], set(), recheck, "catalogue", tried,
                       rejected)
    assert r["label"] == "good" and r["after"] == {"causal-leak": 0.0}
    assert [x["label"] for x in rejected] == ["first", "screen-only"]
    assert ("screen-only", "attn-rows-sum,causal-leak", "causal-leak") in calls     # again, in the suite's order
