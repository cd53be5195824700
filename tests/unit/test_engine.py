"""The diagnostic engine: every mutant named as its own cause, correct code left clean, one diagnosis per
root cause, several independent bugs each named, and untrusted data validated before any rule reads it."""
from __future__ import annotations

import pytest

from harness import engine
from harness.causes import BY_ID, RULES
from harness.selftest import changed_lines
from mutants import MUTANTS, apply_edits, get, reference_source


def _check(id, status, measured=None, data=None, location=None):
    return {"id": id, "status": status, "measured": measured, "expected": "", "detail": "", "data": data or {},
            "location": location}


def test_every_cause_id_is_unique_and_kebab_case():
    ids = [r.CAUSE.id for r in RULES]
    assert len(ids) == len(set(ids))
    for cid in BY_ID:
        assert cid == cid.lower() and " " not in cid and "_" not in cid


def test_every_mutant_cause_has_a_rule():
    rule_ids = {r.CAUSE.id for r in RULES}
    assert {m.cause for m in MUTANTS} <= rule_ids


def test_secondary_symptoms_fold_into_the_root_cause():
    result = {"assignment": "reversal", "checks": [
        _check("attn-rows-sum", "fail", 3.2, location={"file": "f.py", "line": 75},
               data={"key_axis": {"over_keys_err": 3.2, "over_queries_err": 0.0}}),
        _check("causal-leak", "fail", 0.8, data={"past_fraction": 1.0, "mechanism": {"kind": "missing", "text": "x"}}),
        _check("overfit", "fail", 0.9),
        _check("shapes", "pass")]}
    diags = engine.diagnose(result)
    assert [d["id"] for d in diags] == ["softmax-wrong-dim"]
    assert diags[0]["location"] == {"file": "f.py", "line": 75}
    assert any("causal-leak" in e for e in diags[0]["evidence"])


def test_independent_failures_each_get_a_diagnosis():
    result = {"assignment": "reversal", "checks": [
        _check("padded-row-finite", "fail", {"nonfinite_logits": 0.5},
               data={"realistic": True, "mechanism": {"kind": "inf-row", "text": "softmax over a row of -inf"}}),
        _check("decode-encoder-calls", "fail", 19),
        _check("shapes", "pass")]}
    ids = [d["id"] for d in engine.diagnose(result)]
    assert set(ids) == {"inf-mask-nan", "encoder-in-decode-loop"}


def test_an_unexplained_failure_is_still_reported():
    result = {"assignment": "reversal", "checks": [_check("padding-invariance", "fail", 0.3),
                                                   _check("stateless-forward", "fail", 0.2)]}
    ids = [d["id"] for d in engine.diagnose(result)]
    assert "stale-mask" in ids


@pytest.mark.parametrize("payload", [
    None, [], {"checks": [{"id": 3, "status": "pass"}]}, {"checks": [{"id": "x", "status": "clean"}]},
])
def test_malformed_child_results_are_rejected(payload):
    with pytest.raises(engine.InvalidResult):
        engine.validate_payload(payload)


def test_validation_strips_nan_and_bounds_strings():
    p = engine.validate_payload({"checks": [{"id": "a", "status": "fail", "measured": float("nan"),
                                             "detail": "x" * 10 ** 6, "data": {"v": float("inf")}}],
                                 "load": {"ok": True}})
    c = p["checks"][0]
    assert c["measured"] is None and c["data"]["v"] is None and len(c["detail"]) <= 2000


def test_changed_lines_finds_the_edited_line():
    m = get("reversal-softmax-wrong-dim")
    text = apply_edits(reference_source(m.reference), m.edits)
    lines = changed_lines(reference_source(m.reference), text)
    assert len(lines) == 1 and "dim=-2" in text.splitlines()[lines[0] - 1]


COMBOS = [
    ("reversal-pad-not-ignored", "reversal-no-warmup-b"),
    ("reversal-inf-mask-nan", "reversal-encoder-in-decode-loop"),
    # Not trainable-PE: as a Parameter the table is overwritten by the reference's init loop to std ~0.03,
    # and against that table unscaled embeddings are not too small - the two bugs are not independent.
    ("reversal-missing-embedding-scale", "reversal-cross-attention-swapped"),
    ("reversal-missing-sqrt-dk", "reversal-data-not-reversed"),
]




def test_a_result_too_large_for_the_results_file_is_the_students_error():
    """Under the channel's 4 MB a payload can still swell as the results file writes it (indented): past
    limits.RESULT_MB it is not written, and the student's row says why."""
    from harness.limits import RESULT_MB
    from harness.outcome import ChildOutcome
    nested = [[[[1] * 200] * 50] * 20] * 4           # small compact, large indented
    payload = {"checks": [{"id": "a", "status": "pass", "data": {"v": nested}}], "load": {"ok": True}}
    r = engine.build_result(ChildOutcome(payload, "ok"), "s.py", "reversal")
    assert r["error"]["student_fault"] and r["error"]["kind"] == "crashed", r["error"]
    assert f"over the {RESULT_MB} MB" in r["error"]["reason"] and r["checks"] == []


def test_the_parent_reads_at_most_the_result_bound_from_the_channel():
    """Lines past the bound are not parsed, and one line longer than the bound (the Drain's limit) ends the
    same way: the run's outcome is the student's error with the reason, never a 50 MB parse."""
    import os
    from harness.isolation.result_pipe import MAX_RESULT_BYTES, Drain, ResultChannel
    chan = ResultChannel("k", 0.0)
    r, w = os.pipe()
    d = Drain(r, MAX_RESULT_BYTES, chan.on_line, chan.on_end)
    d.start()
    block = b'{"nonce": "x", "pad": "' + b"y" * (1 << 20) + b'"}\n'
    for _ in range(6):
        os.write(w, block)
    os.close(w)
    d.join(10)
    assert chan.oversized and chan.rejected <= 4 and "more than 4 MB" in chan.oversize_reason()
    one = ResultChannel("k", 0.0)
    r, w = os.pipe()
    d = Drain(r, MAX_RESULT_BYTES, one.on_line, one.on_end)
    d.start()
    for _ in range(5):
        os.write(w, b"z" * (1 << 20))                # no line break: one line past the bound
    os.close(w)
    d.join(10)
    assert one.oversized and one.rejected == 0


def test_an_output_flood_counts_the_model_servers_own_pipe_and_says_so():
    """A split run's model server prints on a pipe of its own (split.SplitRun.output): the parent counts it with
    the rest, names it first, and keeps 256 KB of it; a one-process run's text is what it was."""
    import os
    from harness.isolation.result_pipe import MAX_OUTPUT_BYTES, Drain, flood_detail, output_flood

    def drained(n: int) -> Drain:
        r, w = os.pipe()
        d = Drain(r, MAX_OUTPUT_BYTES)
        d.start()
        for _ in range(n // 65536):
            os.write(w, b"x" * 65536)
        os.close(w)
        d.join(10)
        return d
    out, err, server = drained(0), drained(65536), drained(1 << 21)
    assert output_flood(out, err, {"output_chars": 10}, 1.0) is None            # one process: within the limit
    flood = output_flood(out, err, {"output_chars": 10}, 1.0, server)
    assert flood == {"bytes": 10 + 65536 + (1 << 21), "through_print": 10, "to_descriptors": 65536, "limit_mb": 1.0,
                     "model_server": 1 << 21}
    assert len(server.buf) == MAX_OUTPUT_BYTES and "more bytes not kept" in server.text()
    text = flood_detail(flood)
    assert text.startswith("the code printed 2.2 MB (2.1 MB from the model server's stdout and stderr, where the "
                           "code runs, 0.0 MB through print(), 0.1 MB straight to the output descriptors)"), text
    one = output_flood(out, drained(1 << 21), {"output_chars": 0}, 1.0)
    assert "model_server" not in one and flood_detail(one) == (
        "the code printed 2.1 MB (0.0 MB through print(), 2.1 MB straight to the output descriptors); only the "
        "first 256 KB per stream are kept")
