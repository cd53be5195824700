"""Which `lm` diagnoses come first, and when one component's failure is folded into another's (parent side,
torch-free). harness/causes/lm_component.py's rules and engine.diagnose read it.

Order (issue 47): what the course's own tests see comes first. The child replays a failing component on the
course's interface and shapes (its keyword calls; batch 4, 4 heads, d_model 64, d_ff 128, float32; the
course's tolerances: harness/child/probes/lm/diag/course.py) and puts `data.course_replay` on the check:
`visible` true when the course's test of that component would fail too. So, by rank, then confidence:
  0. failures the course's tests see (measured; without a measurement, every cause the static table below
     does not call course-invisible);
  1. failures they cannot see (measured passing on the course's inputs, or a cause of the table), each with
     what it costs in practice;
  2. components not implemented yet, required checks that could not be measured;
  3. the environment: a module the grader's Python lacks, a feature of a newer Python;
  4. notes (severity info).

Fold: a failing component whose outputs equal exactly the reference built on a known bug of a failing
component it is built from (its fingerprint names that component's mutant), or whose traced failing run first
diverges (or raises) on a line that an earlier failing component's own run executed, is explained by that one
("also explains"), unless it has evidence of its own: a fingerprint of one of its own mutants, its adapter passing a value into another parameter's slot,
or a decision (lm_decide) whose cause nothing it is built from can produce. Own evidence keeps its own
diagnosis; the divergence alone never outweighs it.
"""
from __future__ import annotations

from ..lm_table import COMPONENTS, registry_name

VISIBLE, INVISIBLE, UNFINISHED, ENVIRONMENT, NOTE = range(5)
ENVIRONMENT_CAUSES = {"missing-module", "needs-newer-python"}
# what is not done yet: a component not implemented, a required check that could not be measured (it names no
# failure of the code, so it never ranks above one that was measured)
UNFINISHED_CAUSES = {"not-implemented", "check-not-measured"}
# The course's tests cannot see these (they run float32, arange positions and a handful of AdamW steps at
# eps 1e-8): used where the child's replay on the course's inputs did not run (older payloads, a component
# without a replay); what each costs in practice is said with the finding.
COURSE_INVISIBLE = {
    "rmsnorm-no-float32-upcast": "the course's tests run float32 and cannot see it; in float16/bfloat16 training "
                                 "the squares of activations above ~256 overflow and the block's output turns "
                                 "inf/NaN",
    "adamw-eps-inside-sqrt": "the course's tests cannot see it (eps 1e-8 is far below every sqrt(v) there); "
                             "parameters whose gradients are tiny take steps of lr * m / sqrt(eps) instead of "
                             "~lr, so rarely used embeddings jump",
    "rope-ignores-token-positions": "the course's tests pass positions 0..seq-1, which is what a RoPE that counts "
                                    "positions itself assumes; with other positions (a KV cache, packed or shifted "
                                    "sequences) the rotation is wrong",
    # the course's tests load given weights and call each piece once; none trains the model. training-fails
    # names a piece whose own check passes; a model whose forward fails its own check is measured instead (the
    # lm's replay on the course's inputs)
    "training-fails": "the course's tests load given weights and call each piece once, never training the model; "
                      "trained, the loss does not follow the reference's",
    "optimizer-missing-parameters": "the course's tests load given weights and call the model, never training it; "
                                    "trained, the parameters model.parameters() misses never change",
}
COURSE_INPUTS = "batch 4, 4 heads, d_model 64, d_ff 128, float32"


def course_replay(ev, comp: str | None) -> dict | None:
    """The child's replay of comp on the course's inputs, validated by lm_decide.annotate, or None."""
    c = ev.get(f"lm-{comp}") if comp else None
    r = ((c or {}).get("data") or {}).get("course_replay")
    return r if isinstance(r, dict) and isinstance(r.get("visible"), bool) else None


def course_sees(ev, d: dict) -> bool:
    """Would the course's own tests fail on what this diagnosis names? Measured where the child replayed the
    component or one whose failure it explains (folded into it); otherwise every cause but the table's."""
    comp = d.get("component")
    if ev is None or not comp:
        return d.get("id") not in COURSE_INVISIBLE
    below = [comp] + [x for x, _, _ in COMPONENTS if x != comp and broken(ev, x) and folded_into(ev, x) == comp]
    replays = [r for r in (course_replay(ev, x) for x in below) if r is not None]
    return any(r["visible"] for r in replays) if replays else d.get("id") not in COURSE_INVISIBLE


def order(d: dict, ev=None) -> int:
    """The rank of an lm diagnosis (sorted by rank, then -confidence); see the module docstring."""
    if d.get("severity") == "info":
        return NOTE
    if d.get("id") in ENVIRONMENT_CAUSES:
        return ENVIRONMENT
    if d.get("id") in UNFINISHED_CAUSES:
        return UNFINISHED
    return VISIBLE if course_sees(ev, d) else INVISIBLE


def visibility_line(ev, comp: str, cause_id: str | None, failing: str) -> str | None:
    """A line of evidence: whether the course's tests see this failure and, when they cannot, what it costs
    (the table's words for a known cause, else the input it fails on)."""
    r = course_replay(ev, comp)
    if r is None:
        return "what it costs: " + COURSE_INVISIBLE[cause_id] if cause_id in COURSE_INVISIBLE else None
    test = f" ({r['test']})" if r.get("test") else ""
    inputs = r.get("case") or COURSE_INPUTS
    if r["visible"]:
        how = r["problem"] if r.get("problem") else \
            f"differs from the reference by {r['max_abs']:.3g} (tolerance {r['tolerance']:.2g})" \
            if isinstance(r.get("max_abs"), (int, float)) and isinstance(r.get("tolerance"), (int, float)) else \
            "fails"
        return f"the course's own tests see it{test}: on their inputs ({inputs}) it {how}"
    cost = COURSE_INVISIBLE.get(cause_id or "") or f"it fails on other inputs the interface allows: {failing}"
    return (f"the course's own tests cannot see it{test}: on their inputs ({inputs}) it agrees with the "
            f"reference; what it costs: {cost}")


# ----------------------------------------------------------------------------- folding

ORDER = {c: i for i, (c, _, _) in enumerate(COMPONENTS)}
# Causes a property names on several components (a causal mask broken in the attention shows in the block and
# the LM as well): never a component's own evidence while it is built from another.
SHARED_CAUSES = {"future-tokens-visible", "causal-mask-missing", "causal-mask-inverted", "causal-mask-off-by-one",
                 "causal-diagonal-masked", "mask-after-softmax", "interface-mismatch"}


def broken(ev, comp: str) -> bool:
    c = ev.get(f"lm-{comp}")
    return bool(c) and c["status"] in ("fail", "error")


def _started_in(ev, comp: str, other: str) -> bool:
    """comp's failure starts inside `other`'s code: the line where its traced failing run first diverges (or
    raises) is one that ran for `other`'s own failing run. Measured, not assumed from the build order."""
    c, o = ev.get(f"lm-{comp}") or {}, ev.get(f"lm-{other}") or {}
    loc = c.get("location") or {}
    lines = (o.get("data") or {}).get("lines")
    if not isinstance(lines, dict) or not loc.get("file") or not isinstance(loc.get("line"), int):
        return False
    return loc["line"] in set(lines.get(loc["file"]) or ())


def own_evidence(ev, comp: str) -> list[str]:
    """Evidence about comp's own code, measured on comp: what keeps it its own diagnosis."""
    from . import lm_decide
    d = (ev.get(f"lm-{comp}") or {}).get("data") or {}
    out = []
    fp = d.get("fingerprint") if isinstance(d.get("fingerprint"), dict) else {}
    mut = lm_decide.MUTANTS.get(fp.get("mutant")) if isinstance(fp.get("mutant"), str) else None
    if mut is not None and mut.component == registry_name(comp):
        out.append(f"its outputs equal its own known bug '{mut.id}'")
    if any(isinstance(a, dict) and isinstance(a.get("line"), int) for a in d.get("argument_order") or ()):
        out.append("its adapter passes a value into another parameter's slot")
    m = d.get("lmdiag_measured")
    if isinstance(m, dict) and m.get("component") == registry_name(comp) and lm_decide.own_cause(m, SHARED_CAUSES):
        out.append("its measurements name a cause of its own")
    return out


def fingerprinted_below(ev, comp: str) -> str | None:
    """The failing component whose known bug comp's outputs reproduce: comp's own fingerprint (validated by
    lm_decide: a mutant of a component comp is built from) names one mutant of another component, and every
    mutant it also matches is of that component. comp then computes exactly the reference built on that bug:
    its failure is that component's diagnosis, measured rather than traced."""
    m = ((ev.get(f"lm-{comp}") or {}).get("data") or {}).get("lmdiag_measured")
    fp = m.get("fingerprint") if isinstance(m, dict) and m.get("component") == registry_name(comp) else None
    if not isinstance(fp, dict) or not isinstance(fp.get("mutant_component"), str):
        return None
    from . import lm_decide
    whose = {lm_decide.MUTANTS[x].component for x in [fp.get("mutant")] + list(fp.get("also") or ())
             if isinstance(x, str) and x in lm_decide.MUTANTS}
    if whose != {fp["mutant_component"]} or fp["mutant_component"] == registry_name(comp):
        return None
    below = next((o for o, _, _ in COMPONENTS if registry_name(o) == fp["mutant_component"]), None)
    return below if below is not None and ORDER[below] < ORDER[comp] and broken(ev, below) else None


def folded_into(ev, comp: str) -> str | None:
    """The failing component whose diagnosis explains comp's failure (None: comp is its own diagnosis).
    Only an earlier component in the build order, so that two failures on one shared line fold one way; never
    a component with evidence of its own (own_evidence). The measured route first (comp's outputs equal a
    failing component's known bug: fingerprinted_below), then the traced one (its failure starts on a line that
    component's own failing run executed)."""
    seen = {comp}
    target = None
    while True:
        if own_evidence(ev, comp):
            return target
        nxt = fingerprinted_below(ev, comp) or next(
            (o for o, _, _ in COMPONENTS if ORDER[o] < ORDER[comp] and broken(ev, o) and _started_in(ev, comp, o)),
            None)
        if nxt is None or nxt in seen:
            return target
        seen.add(nxt)
        target = comp = nxt
