"""Hostile submissions, fourth wave: what the instructor sees when a submission hides its operations behind decoys
or in threads of its own, or reaches the grader's frames through a trace function or a code object that claims
to be the grader's. Built as the second wave's are (tests/hostile/wave4_*.py, a header naming the base)."""
from __future__ import annotations

from harness.causes.forbidden_operation import kinds
from harness.grading.gradebook import integrity_of
from test_hostile_wave2 import build, causes, check_of, line_of, ops_of, run, score


def test_decoys_of_one_kind_never_hide_the_others(tmp_path):
    """60 listings past the record's bound, then a subprocess, a read of the grader's file and a connect: every
    kind is reported with its line, the listings counted, in the check, the diagnosis and the gradebook."""
    path = build("wave4_decoys", tmp_path / "d")
    r = run(path, cores=1)
    ops = ops_of(r)
    for op in ("list", "subprocess", "read", "connect"):
        assert ops[op]["line"] == line_of(path, f"# OP {op} load"), (op, ops[op])
    assert ops["read"]["target"].endswith("reference_model/reversal.py")
    counted = dict(kinds(check_of(r, "forbidden-ops")))
    assert counted["list"] == 60 and counted["subprocess"] == counted["read"] == counted["connect"] == 1, counted
    diag = next(d for d in r["diagnoses"] if d["id"] == "forbidden-operation")
    assert "list (60 times), subprocess, read, connect" in " ".join(diag["evidence"]), diag["evidence"]
    shown = integrity_of(r)
    assert all(k in shown for k in ("list (60 times)", "subprocess", "read", "connect")), shown


def test_operations_from_threads_the_submission_started_are_reported_at_the_starting_line(tmp_path):
    path = build("wave4_threads", tmp_path / "t")
    r = run(path, cores=1)
    ops = ops_of(r)
    assert ops["os.system"]["line"] == line_of(path, "# OP os.system load"), ops
    assert ops["list"]["line"] == line_of(path, "# OP list load") and ops["list"]["target"] == "/home", ops
    assert "forbidden-operation" in causes(r)


def test_a_trace_function_is_told_to_the_parent_as_it_is_installed(tmp_path):
    """sys.settrace from forward(): the parent's check `isolation` names it, the run is tampering at 0, and the
    trace function is gone after the call."""
    path = build("wave4_settrace", tmp_path / "s")
    r = run(path, cores=1)
    iso = check_of(r, "isolation")
    assert iso is not None and iso["status"] == "fail" and "sys.settrace" in iso["detail"], iso
    assert f"line {line_of(path, '# OP settrace forward')}" in iso["detail"], iso["detail"]
    assert "tampering" in causes(r) and score(r) == 0


def test_a_code_object_claiming_a_grader_file_is_told_to_the_parent(tmp_path):
    """A function whose code says it is harness/child/probes/base.py (so that its operations would pass for the
    grader's): the replace() is told to the parent at once (check `isolation`), tampering at 0."""
    path = build("wave4_code_forge", tmp_path / "c")
    r = run(path, cores=1)
    iso = check_of(r, "isolation")
    assert iso is not None and iso["status"] == "fail", [(c["id"], c["status"]) for c in r["checks"]]
    assert "a code object named" in iso["detail"] and "harness/child/probes/base.py" in iso["detail"], iso["detail"]
    assert f"line {line_of(path, '# OP code load')}" in iso["detail"], iso["detail"]
    assert "tampering" in causes(r) and score(r) == 0


def test_a_swollen_result_is_not_read_past_the_bound(tmp_path):
    """A result swollen to ~54 MB through the grader's frames: the parent reads 4 MB of it, no more, and the
    row says so, beside the live report of the walk (tampering at 0); the results file stays small."""
    import json
    r = run(build("wave4_huge_result", tmp_path / "h"), cores=1)
    iso = check_of(r, "isolation")
    assert iso is not None and "more than 4 MB on the result channel" in iso["detail"], iso
    assert "tampering" in causes(r) and score(r) == 0
    assert len(json.dumps(r, indent=2)) < 5_000_000
