"""Would the course's own checks have seen it? A pack's binding declares how the course calls it (CourseCall); the
replay probe (harness/child/probes/roles/course.py) calls the student's piece that way against the reference, and
the parent (harness/packs/course.py) marks a diagnosis on a piece whose course calls all pass as course-invisible.
On the CS231n pack's reference and mutants, in process: value-from-key and the captioning masks are invisible to the
course's checks, the inverted mask is not; the mark reaches the JSON (a protocol field), the terminal and the HTML."""
from __future__ import annotations

import pytest

from harness import engine
from harness.child.probes.roles import RoleContext
from harness.child.probes.roles.course import rel_error, replay
from harness.packs import api, course
from harness.packs.checks import ids
from harness.packs.cs231n import reference as ref_module
from harness.packs.cs231n.mutants import MUTANTS
from harness.packs.cs231n.pack import PACK
from harness.protocol import Diagnosis
from test_role_probes import KEY, _checks, _load, _resolve

BY_ID = {m.id: m for m in MUTANTS}
COMPONENT = {"cs231n-value-from-key": "MultiHeadAttention", "cs231n-causal-upper": "CaptioningTransformer",
             "cs231n-causal-flipped": "CaptioningTransformer", "cs231n-mask-inverted": "MultiHeadAttention",
             "cs231n-patch-no-permute": "PatchEmbedding", "cs231n-vit-causal-mask": "VisionTransformer",
             "cs231n-layer-dropout-in-eval": "TransformerEncoderLayer"}


def _replays(tmp_path, text: str, only: set | None = None) -> list[dict]:
    module = _load(tmp_path, text)
    out = []
    for b in PACK.bindings:
        if b.course is not None and (only is None or b.component in only):
            rctx = RoleContext(b, _resolve(module, b.target), _resolve(ref_module, b.target), 0, "cpu", False,
                               {KEY: text})
            out += replay(rctx)
    return out


def _visible(checks: list[dict]) -> dict:
    return {c["id"].split(".")[0]: c["data"]["course_calls"]["visible"] for c in checks if c["status"] == "info"}


LATE_CALLED = {"TransformerDecoderLayer", "TransformerEncoderLayer", "PatchEmbedding", "VisionTransformer"}


def test_the_pack_declares_its_course_calls_and_their_checks():
    bound = {b.component for b in PACK.bindings if b.course}
    assert bound == {"PositionalEncoding", "MultiHeadAttention", "CaptioningTransformer"} | LATE_CALLED
    # the feed-forward network: declared as checked by none of the course's own checks, not left unknown
    unchecked = {b.component for b in PACK.bindings if b.course is not None and not b.course}
    assert unchecked == {"FeedForwardNetwork"} and PACK.binding("FeedForwardNetwork").course is api.NO_COURSE_CHECK
    assert PACK.binding("CaptioningTransformer.sample").course is None          # not declared: unknown
    assert {f"{c}.course" for c in bound | unchecked} <= set(ids(PACK))
    assert "CaptioningTransformer.sample.course" not in ids(PACK)
    with pytest.raises(ValueError):
        api.Binding(role="feed-forward", component="F", target="m:F", course=("a call",))
    attention = PACK.binding("MultiHeadAttention").course
    assert any(c.same == ("query", "key", "value") and c.mask for c in attention)     # masked self-attention
    assert all("query" not in c.same for c in attention if c.same != ("query", "key", "value"))
    with pytest.raises(ValueError):
        api.CourseCall("bad", mask="sometimes")


def test_rel_error_is_the_courses_and_fails_on_nan_and_shape():
    assert rel_error([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert rel_error([1.0], [1.002]) == pytest.approx(0.002 / 2.002, rel=1e-4)
    assert rel_error([float("nan")], [1.0]) == float("inf") and rel_error([1.0], [1.0, 2.0]) == float("inf")


def test_the_reference_passes_every_course_call(tmp_path):
    checks = _replays(tmp_path, open(ref_module.__file__).read())
    assert _visible(checks) == {c: False for c in ("PositionalEncoding", "MultiHeadAttention", "CaptioningTransformer",
                                                   "FeedForwardNetwork", *LATE_CALLED)}
    ffn = next(c for c in checks if c["id"] == "FeedForwardNetwork.course")["data"]["course_calls"]
    assert ffn == {"visible": False, "calls": [], "unchecked": True}
    assert all(c["rel_error"] is not None and c["rel_error"] <= 1e-6 for x in checks
               for c in x["data"]["course_calls"]["calls"])


@pytest.mark.parametrize("mid,visible", [("cs231n-value-from-key", False), ("cs231n-causal-upper", False),
                                         ("cs231n-causal-flipped", False), ("cs231n-mask-inverted", True),
                                         ("cs231n-patch-no-permute", True), ("cs231n-vit-causal-mask", True)])
def test_course_visibility_is_measured_and_marks_the_diagnosis(tmp_path, mid, visible):
    text, comp = BY_ID[mid].source(), COMPONENT[mid]
    replays = _replays(tmp_path, text, {comp})
    assert _visible(replays) == {comp: visible}
    checks = _checks(_load(tmp_path, text), text, {comp}) + replays
    first = engine.diagnose({"assignment": PACK.name, "checks": checks, "submission": KEY})[0]
    assert first["id"] == BY_ID[mid].cause and first["component"] == comp
    assert first["course_invisible"] is (not visible)
    assert any(e.startswith(course.UNSEEN) for e in first["evidence"]) is (not visible)
    assert Diagnosis.from_json(first, strict=True).to_json() == first          # a field of the protocol


def test_a_diagnosis_without_a_replay_carries_no_mark_and_lies_are_not_read():
    d = {"id": "value-from-key", "component": "MultiHeadAttention", "evidence": ["x"]}
    course.annotate([d], [])
    assert "course_invisible" not in d
    lie = {"id": "MultiHeadAttention.course", "status": "info", "data": {"course_calls": {
        "visible": False, "calls": [{"name": "a", "passed": False, "rel_error": 0.5}]}}}
    assert course.replay_of([lie], "MultiHeadAttention") is None            # visible contradicts its calls
    lie["data"]["course_calls"]["calls"][0]["rel_error"] = "big"
    assert course.replay_of([lie], "MultiHeadAttention") is None


def test_terminal_and_html_say_the_course_would_not_have_seen_it(tmp_path):
    from harness.report import html, terminal
    diag = {"id": "value-from-key", "title": "The value projection is applied to the key input", "confidence": 0.9,
            "evidence": ["MultiHeadAttention.inputs: measured 0"], "fix": "v = self.value(value)", "location": None,
            "why": "", "severity": "problem", "component": "MultiHeadAttention", "course_invisible": True}
    result = {"assignment": PACK.name, "verdict": "problems", "diagnoses": [diag], "checks": [], "submission": "x"}
    assert course.UNSEEN in terminal.summary(result, color=False, width=200)
    assert course.UNSEEN[1:] in html.render(result).replace("&#39;", "'")
    unchecked = dict(diag, evidence=[f"{course.UNSEEN}: {course.NO_CHECK}"])
    assert f"{course.UNSEEN}: {course.NO_CHECK} (a real bug" in terminal.summary(
        dict(result, diagnoses=[unchecked]), color=False, width=200)
    import re

    def course_row(r):          # the HTML report's "Course" row of the diagnosis (not its evidence list)
        return re.search(r'class="course-unseen">([^<]*)<', html.render(r).replace("&#39;", "'")).group(1)
    assert course.NO_CHECK in course_row(dict(result, diagnoses=[unchecked]))     # both reports say why
    assert course.NO_CHECK not in course_row(result)
    seen = dict(diag, course_invisible=False)
    assert course.UNSEEN not in terminal.summary(dict(result, diagnoses=[seen]), color=False, width=200)


def test_a_larger_pieces_failing_course_call_sees_the_bug_of_a_piece_it_uses(tmp_path):
    """The encoding cast to float32 passes the positional check (float32 input) but breaks the course's float64
    captioning check, and no diagnosis of the captioning model explains that: the course sees it."""
    m = BY_ID["cs231n-pe-dtype-cast"]
    text = m.source()
    replays = _replays(tmp_path, text)
    assert {c for c, v in _visible(replays).items() if v} == {"CaptioningTransformer"}
    checks = _checks(_load(tmp_path, text), text, {"PositionalEncoding"}) + replays
    first = engine.diagnose({"assignment": PACK.name, "checks": checks, "submission": KEY})[0]
    assert first["id"] == m.cause and first["course_invisible"] is False
    assert any("through CaptioningTransformer" in e for e in first["evidence"])


def test_a_piece_the_course_never_checks_is_declared_so_and_said_so(tmp_path):
    """FeedForwardNetwork (NO_COURSE_CHECK): dropout left on in eval passes every check the 2025 notebook runs (they
    all run in training mode), and the report says the course runs no check of the piece itself; a feed-forward with
    no activation breaks the layers' and the vision transformer's checks, so the course sees it through them."""
    for mid, seen in (("cs231n-ffn-dropout-in-eval", False), ("cs231n-ffn-no-activation", True)):
        m = BY_ID[mid]
        text = m.source()
        replays = _replays(tmp_path, text)
        assert {c for c, v in _visible(replays).items() if v} == (
            {"TransformerDecoderLayer", "TransformerEncoderLayer", "VisionTransformer", "CaptioningTransformer"}
            if seen else set())
        checks = _checks(_load(tmp_path, text), text, {"FeedForwardNetwork"}) + replays
        first = engine.diagnose({"assignment": PACK.name, "checks": checks, "submission": KEY})[0]
        assert first["id"] == m.cause and first["component"] == "FeedForwardNetwork"
        assert first["course_invisible"] is (not seen)
        said = [e for e in first["evidence"] if "course" in e]
        assert said == ([f"{course.UNSEEN}: {course.NO_CHECK}"] if not seen else
                        [e for e in said if e.startswith("the course's own checks would see it through ")])
        assert said


def test_an_unchecked_replay_that_lies_is_not_read():
    ok = {"id": "F.course", "status": "info", "data": {"course_calls": {"visible": False, "calls": [],
                                                                      "unchecked": True}}}
    assert course.replay_of([ok], "F") == {"visible": False, "calls": [], "unchecked": True}
    for bad in ({"visible": True, "calls": [], "unchecked": True},
                {"visible": False, "calls": [{"name": "a", "passed": True, "rel_error": 0.0}], "unchecked": True},
                {"visible": False, "calls": []}):
        assert course.replay_of([dict(ok, data={"course_calls": bad})], "F") is None
