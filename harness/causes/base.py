"""A cause is a small document (what, why, symptom, fix) with a stable id, plus one rule.

The rule reads checks (what the probes measured) and returns a Finding when
the measurements point at this cause, or None. Ids are public API: they are
in JSON, reports and grades; never rename or reuse one, add a new id instead.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..assignments import SINGLE_FILE
from ..readable import num, plain


@dataclass(frozen=True)
class Observed:
    """One way a payload confirms a cause's mechanism, as data: check `check` holds, at the dotted `path` into
    it ("data.mechanism.kind", "measured.memory_as_query", "status"), one of `values`; with none, a value that
    is true; `above` / `at_least` / `below`: a number past that bound. The rules read it (Evidence.observed) and
    tests/unit/test_mechanism_audit.py holds every golden's diagnoses at >= 0.8 to it."""
    check: str
    path: str = "data.mechanism.kind"
    values: tuple = ()
    above: float | None = None
    at_least: float | None = None
    below: float | None = None

    def holds(self, check: dict | None) -> bool:
        v: object = check
        for key in self.path.split("."):
            v = v.get(key) if isinstance(v, dict) else None
        if (self.above, self.at_least, self.below) != (None, None, None):
            return isinstance(v, (int, float)) and not isinstance(v, bool) and \
                (self.above is None or v > self.above) and (self.at_least is None or v >= self.at_least) and \
                (self.below is None or v < self.below)
        return v in self.values if self.values else bool(v)


@dataclass(frozen=True)
class Cause:
    id: str
    title: str
    what: str
    why: str
    symptom: str
    fix: str
    lesson: str = ""
    assignments: tuple = SINGLE_FILE   # names of harness/assignments.py
    mechanism: str = ""          # what must be observed, beyond the symptom, before the cause is named at >= 0.8
    observed: tuple = ()         # Observed: that mechanism as data (any one holds when named at >= 0.8)
    severity: str = "problem"    # "info": reported, but the verdict stays clean (a contract deviation)


@dataclass
class Finding:
    confidence: float
    evidence: list
    location: dict | None = None
    explains: tuple = ()          # check ids whose failure this cause accounts for
    fix: str | None = None        # overrides the cause's fix when the finding knows better
    title: str | None = None      # overrides the title (the catch-all says what was observed)
    component: str | None = None  # the component the diagnosis is about (lm's, a pack's binding)


RANDOM_FORWARD_UNRELIABLE = ("causal-leak", "padding-invariance", "heads-permutation", "stateless-forward",
                             "batch-independence", "attn-rows-sum", "decode-determinism", "decode-consistency",
                             "decode-batch-rows",
                             "overfit", "long-inputs")
# block: two passes of the same tokens differ (block-permutation's mechanism, kind "random"): the checks that
# compare two passes are no evidence either; block-permutation itself is the randomness's evidence then.
BLOCK_RANDOM_UNRELIABLE = ("block-causal", "block-causal-off")
RANDOMNESS_EVIDENCE = ("eval-determinism", "block-permutation")     # the checks that measure a random forward


class Evidence:
    """Read-only view of the validated checks, for rules."""

    def __init__(self, result: dict):
        self.result = result
        self.by_id: dict[str, dict] = {}
        for c in result.get("checks", []):
            self.by_id.setdefault(c["id"], c)
        self.assignment = result.get("assignment")
        self.load = result.get("load", {})
        # A random forward pass makes every comparison of two passes fail: those failures are not evidence.
        det = self.by_id.get("eval-determinism")
        self.unreliable = set(RANDOM_FORWARD_UNRELIABLE) if det and det["status"] == "fail" else set()
        perm = self.by_id.get("block-permutation")
        if perm and perm["status"] == "fail" and ((perm.get("data") or {}).get("mechanism") or {}).get("kind") == \
                "random":
            self.unreliable |= set(BLOCK_RANDOM_UNRELIABLE)

    def get(self, id):
        return self.by_id.get(id)

    def status(self, id):
        c = self.by_id.get(id)
        return c["status"] if c else None

    def failed(self, id):
        """The check when it failed *with a measurement*: a failure measured as None is no evidence."""
        c = self.by_id.get(id)
        if id in self.unreliable:
            return None
        return c if c and c["status"] == "fail" and c.get("measured") is not None else None

    def weights_not_over_keys(self) -> bool:
        """The attention weights are not distributions over the keys (softmax over another axis): mechanisms
        that read them as such (mass on later keys, on PAD keys) are not evidence then."""
        return self.failed("attn-rows-sum") is not None and \
            over_another_axis(self.data("attn-rows-sum").get("key_axis") or {})

    def padding_from_decoder_self_attention(self) -> tuple:
        """("padding-invariance",) when its PAD weight sits in the decoder self-attention (11 x 11 there), which
        a broken causal mask explains (it leaves rows with no allowed key); () otherwise."""
        m = self.mechanism("padding-invariance")
        return ("padding-invariance",) if m.get("t_q") == m.get("t_k") == 11 else ()

    def mechanism(self, id) -> dict:
        """What the probe observed about how its property broke (kind, line, text), or {}."""
        m = self.data(id).get("mechanism")
        return m if isinstance(m, dict) else {}

    def observed(self, cause: Cause) -> Observed | None:
        """The first of the cause's declared mechanisms that this payload's checks hold, or None."""
        return next((o for o in cause.observed if o.holds(self.by_id.get(o.check))), None)

    def passed(self, id):
        return self.status(id) == "pass"

    def data(self, id) -> dict:
        c = self.by_id.get(id)
        return (c or {}).get("data") or {}

    def errors(self):
        return [c for c in self.by_id.values() if c["status"] == "error" and not (c.get("data") or {}).get("harness_error")]

    def errors_matching(self, *needles):
        out = []
        for c in self.errors():
            msg = ((c.get("data") or {}).get("message") or c.get("detail") or "").lower()
            if any(n in msg for n in needles):
                out.append(c)
        return out


def over_another_axis(ka: dict) -> bool:
    """The applied attention weights are distributions over the queries or another axis (the heads), not keys."""
    return ka.get("over_queries_err", 1.0) < 1e-4 or ka.get("over_other_err", 1.0) < 1e-4


def padding_finding(ev, kind: str) -> Finding | None:
    """padding-invariance failed and the PAD weight's mechanism is `kind` (the two padding-mask causes)."""
    c = ev.failed("padding-invariance")
    mech = ev.mechanism("padding-invariance")
    if ev.weights_not_over_keys() or not c or mech.get("kind") != kind:
        return None
    if mech.get("t_q") == mech.get("t_k") == 11 and ev.failed("causal-leak"):
        return None     # PAD weight in the decoder self-attention: rows the broken causal mask leaves empty
    lines = [say(c), "mechanism: " + mech["text"]]
    explains: tuple[str, ...] = ("padding-invariance", "overfit")
    leak = ev.failed("causal-leak")
    if kind == "inverted" and leak and ev.mechanism("causal-leak").get("kind") == "no-key-allowed":
        # combined with the causal triangle by AND, a mask that allows only PAD leaves unpadded rows no key
        lines += [say(leak), "mechanism: " + ev.mechanism("causal-leak")["text"]]
        explains += ("causal-leak", "first-loss", "brief-training", "decode-accuracy", "decode-consistency")
    return Finding(0.85, lines, c.get("location"), explains=explains)


SHAPE_ERRORS = ("must match the size", "size of tensor", "expected size", "shapes cannot be multiplied",
                "size mismatch", "mat1 and mat2")


def say(c: dict) -> str:
    """One evidence line: measured vs expected, in numbers."""
    m = c.get("measured")
    shown = num(m) if isinstance(m, float) else m if isinstance(m, str) else plain(m)   # never None, never nan
    text = f"{c['id']}: measured {shown}"
    if c.get("expected"):
        text += f", expected {c['expected']}"
    if c.get("detail"):
        text += f" ({c['detail']})"
    return text
