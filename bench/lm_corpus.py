"""Run `check --quick` on every entry of tests/corpus/lm (correct styles, special repositories, hand-written bugs).

    python bench/lm_corpus.py [--split holdout|calibration] [--only TEXT]

For bugs: flagged (verdict problems), the right component (the first diagnosis names the manifest's
component), the top cause and its confidence next to the manifest's cause (their names differ: the
corpus was written without mtxdiag's ids; ALIASES maps the ones that mean the same bug), and whether a
wrong cause was given at confidence >= 0.8. Correct entries must come back clean. Writes
bench/results/lm_corpus.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.api import check_file  # noqa: E402
from harness.assignments import LM  # noqa: E402
from harness.runner import Limits  # noqa: E402

CORPUS = ROOT / "tests" / "corpus" / LM.name
# corpus cause -> mtxdiag cause ids that name the same bug
ALIASES = {
    # harness.child.probes.lm.diag's names for the same bugs (wired in after the corpus was written)
    "swiglu-gelu-not-silu": {"swiglu-wrong-activation"},
    "linear-has-bias": {"interface-mismatch"}, "warmup-integer-division": {"schedule-warmup-integer-division"},
    "get-batch-last-start-never-sampled": {"get-batch-start-range"},
    "adamw-coupled-decay": {"adamw-coupled-weight-decay"}, "softmax-no-max-subtraction": {"softmax-overflow"},
    "attention-scaled-by-d-model": {"attention-scaled-by-dk"}, "causal-off-by-one": {"causal-mask-off-by-one"},
    "clipping-scales-below-max": {"clipping-scales-up"}, "cross-entropy-sum-not-mean": {"cross-entropy-wrong-mean", "cross-entropy-sum-not-mean"},
    "get-batch-not-shifted": {"target-not-shifted"}, "heads-split-without-transpose": {"heads-split-wrong"},
    "mask-zero-not-inf": {"mask-fill-zero"}, "rmsnorm-no-float32": {"rmsnorm-no-float32-upcast"},
    "rope-wrong-frequency-exponent": {"rope-frequency-exponent"}, "swiglu-silu-other-branch":
        {"swiglu-gate-on-wrong-branch"}, "state-dict-key-mismatch": {"interface-mismatch"},
    "adapter-arguments-swapped": {"interface-mismatch"}, "adapter-returns-none": {"interface-mismatch"},
    "adapter-weights-in-wrong-order": {"interface-mismatch"},
    # (this key once stood twice in this table; the second, {"missing-residual"}, silently replaced the first)
    "block-residual-skips-attention": {"attention-output-dropped", "missing-residual"},
    "get-batch-wrong-dtype": {"interface-mismatch"},   # the manifest's category for it is "interface"
    "cosine-floor-starts-late": {"schedule-no-floor", "schedule-cosine-length"},
    "tensor-created-with-token-ids-dtype": {"interface-mismatch"},   # issue 13 lists it as an interface problem
}
GENERIC = {"component-mismatch", "forward-error", "unexplained-failure"}   # say where, not what: never "wrong"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default=None)
    ap.add_argument("--only", default=None)
    a = ap.parse_args()
    entries = json.loads((CORPUS / "manifest.json").read_text())
    entries = [e for e in entries if (not a.split or e.get("split") == a.split) and (not a.only or a.only in e["path"])]
    rows = []
    for e in entries:
        t = time.monotonic()
        r = check_file(CORPUS / e["path"], assignment=LM.name, quick=True, limits=Limits(timeout_s=180))
        d = r["diagnoses"]
        top = d[0] if d else {}
        row = {"path": e["path"], "kind": e["kind"], "split": e.get("split"), "verdict": r["verdict"],
               "top": top.get("id"), "confidence": top.get("confidence"), "component": top.get("component"),
               "seconds": round(time.monotonic() - t, 1)}
        if e["kind"] == "bug":
            want = e["component"].replace("_", "-")
            names = ALIASES.get(e["cause"], set()) | {e["cause"]}
            row.update(expected_component=want, expected_cause=e["cause"], flagged=r["verdict"] == "problems",
                       component_ok=top.get("component") == want, named=top.get("id") in names,
                       wrong_confident=bool(top) and top.get("id") not in names | GENERIC
                       and (top.get("confidence") or 0) >= 0.8)
        elif e["kind"] == "correct":
            row["ok"] = r["verdict"] == "clean"
        rows.append(row)
        want = f"want {e['cause']} [{e['component']}]" if e["kind"] == "bug" else ""
        print(f"{e['path']:48} {r['verdict']:9} {str(top.get('id')):32} {top.get('confidence')} "
              f"[{top.get('component')}] {want}", file=sys.stderr)
    bugs = [r for r in rows if r["kind"] == "bug"]
    correct = [r for r in rows if r["kind"] == "correct"]
    s = {"bugs": len(bugs), "flagged": sum(r["flagged"] for r in bugs),
         "component_right": sum(r["component_ok"] for r in bugs), "named_right": sum(r["named"] for r in bugs),
         "wrong_cause_confident": sum(r["wrong_confident"] for r in bugs),
         "correct": len(correct), "correct_clean": sum(r["ok"] for r in correct)}
    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    (ROOT / "bench" / "results" / "lm_corpus.json").write_text(json.dumps({"summary": s, "rows": rows}, indent=2))
    print(json.dumps(s))


if __name__ == "__main__":
    main()
