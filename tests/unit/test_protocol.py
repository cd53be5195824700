"""The typed process boundary (harness/protocol.py, issue 28 item 3): a request survives argv and JSON
unchanged, the cache key is the grader's, every result is schema 1 exactly (the goldens, round-tripped
through Result), and each wire constant is declared once."""
from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path

import pytest

from harness import protocol
from harness.protocol import ABSENT, CheckSpec, Diagnosis, Limits, Result, parse_argv, wire_argv

ROOT = Path(__file__).resolve().parents[2]
GOLDENS = sorted((Path(__file__).resolve().parent / "goldens").glob("*.json"))

SPECS = [
    CheckSpec("/tmp/x/submission.py"),
    CheckSpec("/w/run-1/repo", assignment="lm", seed=7, device="cuda", quick=True, isolate="bwrap",
              display="-odd name.py", limits=Limits(timeout_s=12.5, memory_mb=100, threads=2, cores=2, warm=True,
                                                     only_probes="contract,shapes", extra_probes="-x")),
    CheckSpec("a b.ipynb", seed=-3, limits=Limits(output_mb=0.25, load_timeout_s=1.0, processes=0)),
]


@pytest.mark.parametrize("spec", SPECS)
def test_a_spec_survives_the_childs_argv_and_the_daemons_json(spec):
    argv = spec.to_argv() + wire_argv(protocol.RESULT_FD)
    assert parse_argv(argv) == (spec, protocol.RESULT_FD, True, False)
    assert parse_argv(spec.to_argv() + wire_argv(5, deferred=True)) == (spec, 5, True, True)
    assert CheckSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec


def test_a_deferred_run_takes_only_its_late_limits_as_strings():
    """early.py: a fork started before its candidate is told only which probes and gate, nothing else."""
    lim = Limits(timeout_s=9.0, cores=2, warm=True, costs="overfit:0.3")
    got = protocol.late_limits(b'{"only_probes": "a,b", "extra_probes": "", "gate": "causal-leak"}', lim)
    assert got == replace(lim, only_probes="a,b", gate="causal-leak")
    for bad in (b"", b"[]", b'{"timeout_s": "1"}', b'{"gate": 3}', b'{"gate": "x", "warm": ""}', b"\xff{"):
        with pytest.raises(ValueError):
            protocol.late_limits(bad, lim)


def test_the_childs_spec_names_its_copy_and_the_sandbox_it_got():
    spec = CheckSpec("hw/model.py", quick=True, limits=Limits(cores=2))
    child = spec.for_child("/tmp/w/submission.py", "bwrap")
    assert (child.path, child.shown(), child.isolate, child.quick) == ("/tmp/w/submission.py", "hw/model.py",
                                                                        "bwrap", True)
    assert child.side and not replace(child, device="cuda").side and not replace(spec, limits=Limits()).side
    assert CheckSpec.from_argv(child.to_argv() + wire_argv(9)) == child


def test_a_malformed_request_is_refused_whole():
    good = SPECS[1].to_json()
    for bad in (dict(good, seed="7"), dict(good, quick=1), dict(good, seed=True), dict(good, surprise=1),
                {k: v for k, v in good.items() if k != "path"}, dict(good, limits=dict(good["limits"], gpu=1)),
                dict(good, limits="x"), [good]):
        with pytest.raises(ValueError):
            CheckSpec.from_json(bad)
    assert CheckSpec.from_json(dict(good, limits=dict(good["limits"], timeout_s=30))).limits.timeout_s == 30.0
    with pytest.raises(SystemExit):          # no abbreviation of a flag is read as another one
        parse_argv(["--submission=x", "--result-fd=3", "--qui"])


def test_the_cache_key_is_the_graders():
    from harness.grading.discovery import Options, cache_key
    for opts in (Options(), Options(assignment="lm", seed=3, quick=True, output_mb=2.0, device="cuda")):
        spec = CheckSpec("x.py", assignment=opts.assignment, seed=opts.seed, device=opts.device, quick=opts.quick,
                         limits=Limits(output_mb=opts.output_mb, timeout_s=1.0))
        assert spec.cache_key("ab" * 32) == cache_key("ab" * 32, opts)
        assert spec.result_options() == opts.result_options()
    base = CheckSpec("x.py")
    assert base.cache_key("00") != replace(base, seed=1).cache_key("00") != base.cache_key("01")
    assert base.cache_key("00") == replace(base, path="y.py", limits=Limits(timeout_s=5)).cache_key("00")


# ---- schema 1 ----------------------------------------------------------------------------------------------

def _replay(path: Path) -> tuple[dict, dict]:
    from harness.engine import build_result
    from harness.outcome import ChildOutcome
    g = json.loads(path.read_text())
    outcome = ChildOutcome(g["payload"], g["status"], g.get("reason", ""))
    return g, build_result(outcome, g["submission"], g["requested_assignment"], quick=g["quick"])


@pytest.mark.parametrize("path", GOLDENS, ids=[p.stem for p in GOLDENS])
def test_every_golden_result_round_trips_through_result(path):
    g, full = _replay(path)
    assert Result.from_json(g["result"]).to_json() == g["result"]           # the recorded keys, unchanged
    typed = Result.from_json(full, strict=True)
    assert json.dumps(typed.to_json()) == json.dumps(full)                  # every key, value and order
    assert all(isinstance(d, Diagnosis) for d in typed.diagnoses)
    assert all(isinstance(c, protocol.Check) for c in typed.checks)


def test_strict_reading_refuses_what_schema_1_does_not_declare():
    _, full = _replay(GOLDENS[0])
    for bad in (dict(full, surprise=1), {k: v for k, v in full.items() if k != "stderr"}, dict(full, schema=2),
                dict(full, verdict="fine"), dict(full, diagnoses=[dict(full["diagnoses"][0] if full["diagnoses"]
                                                                          else {}, _message="x")]),
                dict(full, checks=[{"id": "x", "status": "weird", "measured": None, "expected": "", "detail": "",
                                    "data": {}, "location": None}])):
        with pytest.raises(ValueError):
            Result.from_json(bad, strict=True)
    assert Result.from_json(dict(full, surprise=1)).to_json()["surprise"] == 1     # lenient reading keeps it


def test_an_absent_field_stays_absent():
    """A grader's synthetic row has no severity; lm's diagnoses carry a component, others none."""
    row = {"id": "grader-fault", "title": "t", "confidence": 1.0, "evidence": ["e"], "fix": "f", "location": None,
           "why": "w"}
    d = Diagnosis.from_json(row)
    assert d.severity is ABSENT and d.to_json() == row and list(d.to_json()) == list(row)
    assert list(Diagnosis.from_json(dict(row, severity="info", component="softmax")).to_json())[-2:] == \
        ["severity", "component"]


def test_the_engine_keeps_no_private_key_in_its_diagnoses():
    for p in GOLDENS:
        _, full = _replay(p)
        assert not [k for d in full["diagnoses"] for k in d if k.startswith("_")], p.name


# ---- one declaration of each wire constant -----------------------------------------------------------------

WIRE = ("RESULT_FD", "EXIT_CHANNEL", "EXIT_MEMORY", "PARENT_CHECKS", "STATUSES")


def test_each_wire_constant_is_assigned_only_in_the_protocol():
    found = []
    for p in sorted((ROOT / "harness").rglob("*.py")):
        if p.name == "protocol.py":
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found += [f"{p.relative_to(ROOT)}:{node.lineno} {t.id}" for t in targets
                          if isinstance(t, ast.Name) and t.id in WIRE]
    assert found == [], f"a second copy of a wire constant: {found}; import it from harness/protocol.py"


def test_the_result_channels_message_kinds_are_the_protocols():
    """Every "event" the child sends is a declared kind (and the parent's channel reads those names)."""
    sent = set()
    for name in ("main.py", "side.py"):
        for node in ast.walk(ast.parse((ROOT / "harness" / "child" / name).read_text())):
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if isinstance(k, ast.Constant) and k.value == "event":
                        sent.add(v.id if isinstance(v, ast.Name) else repr(getattr(v, "value", v)))
    assert sent and sent <= {"MSG_PHASE", "MSG_RESULT", "MSG_INTEGRITY"}, sent
    assert set(protocol.MESSAGE_KINDS) == {"phase", "result", "integrity"}


def test_an_outcome_has_a_declared_status():
    from harness.engine import build_result
    from harness.outcome import ChildOutcome
    with pytest.raises(ValueError):
        ChildOutcome(None, "timed-out")
    recorded = {json.loads(p.read_text())["status"] for p in GOLDENS}
    assert recorded <= set(protocol.OUTCOME_STATUSES)
    for status in protocol.OUTCOME_STATUSES[1:]:      # each ends as an error whose kind is the status
        r = build_result(ChildOutcome(None, status, "ended"), "x.py", "block")
        assert r["verdict"] == "error" and r["error"]["kind"] == status
        assert r["error"]["student_fault"] is (status != "grader-fault")


def test_the_warm_workers_control_messages_are_the_protocols():
    """zygote.py (through forkcare.py) answers and warm.py reads only the declared keys (no string typed on one side
    only; the model server's standalone worker writes them down, tests/unit/test_model_zygote.py)."""
    declared = {protocol.CTL_READY, protocol.CTL_STARTED, protocol.CTL_EXIT, protocol.CTL_POISONED,
                protocol.CTL_ERROR}
    assert protocol.FORK_FDS == (0, 1, 2, protocol.RESULT_FD)
    assert set(protocol.CTL) == declared and len(protocol.CTL) == len(declared)
    for name in ("child/zygote.py", "isolation/forkcare.py", "isolation/warm.py", "isolation/warm_split.py"):
        src = (ROOT / "harness" / name).read_text()
        assert not [k for k in declared if f'"{k}":' in src or f'get("{k}")' in src or f'["{k}"]' in src], name
        if name == "child/zygote.py":       # the loop is forkcare.serve's, handed the protocol's keys
            assert "forkcare.serve(" in src and " CTL," in src, name
        elif name != "isolation/forkcare.py":
            assert "CTL_EXIT" in src and "CTL_STARTED" in src, name
