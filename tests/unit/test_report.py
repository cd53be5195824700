"""The HTML report: rendered for real results (reference, mutants) and for hand-made broken ones.

Fast tests use synthetic results and one --quick check of a mutant. Tests marked
`slow` run two full checks (brief training, ~30-60 s each). Tests marked `browser`
open the reports in headless Chromium through Playwright (Debian's /usr/bin/chromium,
no browser download) and keep screenshots under reports/test-artifacts/.
"""
from __future__ import annotations

import base64
import copy
import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from harness.report import figures, html

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "reports" / "test-artifacts"
NOTEBOOK = ROOT / "tests" / "fixtures" / "correct" / "reversal_notebook_style.ipynb"


# -- synthetic results ----------------------------------------------------------------------------

def _cross(kind="anti", L=6, heads=4, layers=2):
    import numpy as np
    rows = L + 1
    maps = []
    for h in range(heads):
        m = np.full((rows, L), 0.02)
        for i in range(L):
            m[i, (L - 1 - i) if kind == "anti" else i] = 0.9
        m[L, :] = 1 / L
        maps.append((m / m.sum(1, keepdims=True)).round(3).tolist())
    layer = {"anti": [0.88] * heads if kind == "anti" else [0.03] * heads,
             "diag": [0.03] * heads if kind == "anti" else [0.88] * heads, "maps": maps}
    src = [8, 3, 1, 9, 0, 4][:L]
    return {"src": src, "tgt_in": [11] + src[::-1], "pred": src[::-1] + [12], "layers": [layer] * layers}


def _check(id, status="pass", measured=None, expected="", detail="", data=None, location=None):
    return {"id": id, "status": status, "measured": measured, "expected": expected, "detail": detail,
            "data": data or {}, "location": location}


def synthetic(**over) -> dict:
    """A complete, well-formed reversal result with every artifact, then overridden."""
    T = 9
    steps = 400
    r = {
        "schema": 1, "harness_version": "test", "submission": "student.py", "assignment": "reversal",
        "quick": False, "verdict": "problems",
        "diagnoses": [{"id": "missing-sqrt-dk", "title": "Attention scores are not divided by sqrt(d_k)",
                       "confidence": 0.9, "evidence": ["attn-saturation: measured 0.97, expected < 0.75",
                                                       "also explains overfit: measured 1.2"],
                       "fix": "Divide the scores by math.sqrt(self.d_k).", "why": "Softmax saturates.",
                       "location": None}],
        "checks": [
            _check("contract", "pass", {"missing": []}, "defines MiniTransformer", "all contract names defined"),
            _check("param-count", "info", {"total": 235917, "embeddings": 1664, "encoder": 99968,
                                           "decoder": 133440, "generator": 845}, "235,981 (lesson table)",
                   data={"lesson": {"embeddings": 1664, "encoder": 99968, "decoder": 133504, "generator": 845,
                                    "total": 235981}}),
            _check("attn-saturation", "fail", 0.97, "< 0.75", "mean of row maxima"),
            _check("overfit", "fail", 1.2, "< 0.05", "after 400 steps"),
            _check("cross-attn-pattern", "info", {"anti_diagonal": 0.88, "diagonal": 0.03, "kind": "anti-diagonal"},
                   "anti-diagonal", "layer 2"),
            _check("shapes", "skip", None, "", "skipped for a reason"),
            _check("decode", "error", {"exception": "RuntimeError"}, "runs", "boom"),
        ],
        "skipped_code": [{"line": 200, "end_line": 202, "code": "model = train(MiniTransformer())",
                          "reason": "top-level call"}],
        "stdout": "step 1 loss 3.3\n", "stderr": "", "timings": {"total_s": 31.2}, "error": None,
        "artifacts": {
            "cross_attention": _cross(),
            "training": {"loss": [3.3 * math.exp(-i / 150) + 0.05 for i in range(steps)],
                         "lr": [1e-3 * min((i + 1) / 50, 1) for i in range(steps)],
                         "grad_norm": [1.0 if i % 10 == 0 else None for i in range(steps)],
                         "seconds": 40.0, "batch_size": 32},
            "trace": {"lr": [1e-3 * min((i + 1) / 400, 1) for i in range(440)], "loss": [2.9] * 440},
            "pe_table": [[math.sin(p / 10 ** (j / 16)) for j in range(64)] for p in range(50)],
            "pe_diff": None,
            "dependency": [[0.5 if 0 < j <= i else 0.0 for j in range(T)] for i in range(T)],
            "target_mask": [[1 if j <= i else 0 for j in range(T)] for i in range(T)],
            "attn_rowmax_init": [0.5 + 0.1 * math.sin(i) for i in range(640)],
            "overfit": [3.0 * math.exp(-i / 20) for i in range(120)],
        },
    }
    r.update(over)
    return r


def lite(**over) -> dict:
    """The synthetic result without artifacts: for tests about text, no figures to draw."""
    r = synthetic(**over)
    r["artifacts"] = {}
    return r


@pytest.fixture(scope="module")
def full_render():
    """The full synthetic report, rendered once: (html, render_timings)."""
    text = html.render(synthetic())
    return text, dict(html.render_timings)


def _image_size(uri: str) -> tuple[int, int]:
    """(width, height) of a figure's SVG data URI; the SVG must parse as XML."""
    from xml.dom.minidom import parseString
    raw = base64.b64decode(uri.split(",", 1)[1])
    root = parseString(raw).documentElement
    assert root.tagName == "svg"
    return int(root.getAttribute("width")), int(root.getAttribute("height"))


def _images(text: str) -> list[str]:
    return re.findall(r'<img src="(data:image/svg\+xml;base64,[A-Za-z0-9+/=]+)"', text)


def _sections(text: str) -> dict:
    """section id -> its HTML."""
    parts = re.split(r'(?=<section id=")', text)
    return {re.match(r'<section id="([^"]+)"', p).group(1): p for p in parts if p.startswith("<section id=")}


# -- synthetic: content, robustness, bounds -------------------------------------------------------

def test_full_synthetic_report_has_every_picture_and_table(full_render):
    text, timings = full_render
    secs = _sections(text)
    for sid in ("cross-attention", "training", "lr-schedule", "positional", "causal", "rowmax", "overfit"):
        assert "<img" in secs[sid], sid
        assert 'class="absent"' not in secs[sid], sid
    assert "block-weights" not in secs                       # a block picture in a reversal report: left out
    imgs = _images(text)
    assert len(imgs) >= 8                                     # 2 cross-attention layers + 6 others
    for uri in imgs:
        w, h = _image_size(uri)
        assert 0 < w <= 1000 and 0 < h <= 1200
    assert all(re.search(r'alt="[^"]{20,}"', tag) for tag in re.findall(r"<img [^>]+>", text))
    assert "Anti-diagonal mass: <strong>0.88</strong>" in text
    assert "235,981" in text and "235,917" in text and "-64" in text      # the parameter table
    assert "Attention scores are not divided by sqrt(d_k)" in text
    assert "Divide the scores by math.sqrt(self.d_k)." in text and "Softmax saturates." in text
    assert 'href="#check-overfit"' in text                  # 'also explains' links to the check row
    assert "model = train(MiniTransformer())" in text         # skipped code
    for label in ("✓ pass", "✗ fail", "– skip", "! error", "i info"):
        assert label in text                                  # status is text, not colour alone
    for key in ("figure:cross-attention", "figure:training", "figures", "template", "total", "cpu"):
        assert key in timings
    assert timings["cpu"] < 10.0, timings                  # ~0.2 s (SVG); a bound on a hang, not a speed test


def test_self_contained_no_network_no_script(full_render):
    text, _ = full_render
    assert "<script" not in text.lower()
    refs = re.findall(r'(?:src|href)="([^"]*)"', text)
    assert refs and all(r.startswith(("data:image/svg+xml;base64,", "#")) for r in refs)
    assert "@import" not in text and "url(" not in text


def test_reference_training_curves_when_present_and_a_note_when_absent():
    r = synthetic()
    r["artifacts"] = {"training": r["artifacts"]["training"]}
    assert "reference&#39;s curves are not in this result" in html.render(r)
    r["reference"] = {"training": copy.deepcopy(r["artifacts"]["training"])}
    text = html.render(r)
    assert "curves are not in this result" not in text
    assert "reference" in _sections(text)["training"]


def test_quick_result_says_why_training_pictures_are_absent():
    r = synthetic(quick=True)
    r["artifacts"] = {"trace": r["artifacts"]["trace"]}
    r["checks"] = [c for c in r["checks"] if c["id"] != "cross-attn-pattern"]
    secs = _sections(html.render(r))
    for sid in ("cross-attention", "training"):
        assert "--quick" in secs[sid] and "<img" not in secs[sid]
    assert "<img" in secs["lr-schedule"]                     # the trace exists in --quick too


def test_absent_reasons_name_the_skipped_or_failed_probe():
    r = lite()
    r["checks"] = [c for c in r["checks"] if c["id"] not in ("overfit", "attn-saturation")]
    r["checks"] += [_check("overfit", "skip", None, "", "the submission does not define MiniTransformer"),
                    _check("attn-saturation", "error", {"exception": "RuntimeError"}, "",
                           "model(src, tgt_in) raised RuntimeError: view size")]
    secs = _sections(html.render(r))
    assert "skipped" in secs["overfit"] and "does not define MiniTransformer" in secs["overfit"]
    assert "failed with an error" in secs["rowmax"] and "view size" in secs["rowmax"]


def test_load_failure_renders_without_pictures():
    r = {"schema": 1, "submission": "broken.py", "assignment": "reversal", "quick": False, "verdict": "problems",
         "diagnoses": [{"id": "syntax-error", "title": "The file does not parse", "confidence": 1.0,
                        "evidence": ["invalid syntax"], "fix": "Fix the syntax.", "why": "", "location": None}],
         "checks": [], "skipped_code": [], "stdout": "", "stderr": "", "artifacts": {}, "timings": {"total_s": 0.4},
         "error": None}
    text = html.render(r)
    assert "The file does not parse" in text and "could not be loaded" in text
    assert "<img" not in text


@pytest.mark.parametrize("bad", [
    None, "a string", 42, [], {}, [None, None], [[None]], {"layers": None}, {"layers": [None, 3, {"maps": "x"}]},
    {"layers": [{"maps": [[[None, None]]], "anti": None, "diag": "x"}]},
])
def test_malformed_artifacts_never_crash(bad):
    r = synthetic()
    for k in list(r["artifacts"]):
        r["artifacts"][k] = copy.deepcopy(bad)
    r["artifacts"]["block_weights"] = copy.deepcopy(bad)
    r["artifacts"]["training"] = copy.deepcopy(bad)
    text = html.render(r)
    assert "<html" in text and "Attention scores are not divided" in text
    assert "could not be rendered" not in text               # sections fail one by one, not the page
    for sid, sec in _sections(text).items():
        if sid in ("cross-attention", "training", "lr-schedule", "positional", "causal", "rowmax", "overfit"):
            assert "<img" in sec or 'class="absent"' in sec, sid


def test_none_values_inside_lists_and_ragged_matrices():
    r = synthetic()
    a = r["artifacts"]
    a["training"]["loss"][10:20] = [None] * 10
    a["training"]["lr"][5] = None
    a["overfit"] = [3.0, None, 2.0, float("nan"), 1.0]
    a["attn_rowmax_init"] = [None, 0.5, "x", 0.6, True]
    a["dependency"] = [[0.0, None], [0.1], None, "row"]
    a["pe_table"][3] = None
    a["pe_diff"] = [[0.5, None, -0.5]] * 10
    a["cross_attention"]["layers"][0]["maps"][1] = None
    a["cross_attention"]["pred"] = [None, "x", 3]
    text = html.render(r)
    secs = _sections(text)
    for sid in ("cross-attention", "training", "positional", "causal", "rowmax", "overfit"):
        assert "<img" in secs[sid], sid


def test_huge_artifacts_are_bounded():
    r = synthetic()
    a = r["artifacts"]
    a["training"] = {"loss": [1.0] * 100_000, "lr": [1e-3] * 100_000, "grad_norm": [1.0] * 100_000}
    a["dependency"] = [[0.1] * 500 for _ in range(500)]
    big = [[0.01] * 300 for _ in range(300)]
    a["cross_attention"]["layers"] = ([{"maps": [big] * 16, "anti": [0.1] * 16, "diag": [0.1] * 16}]
                                      + [{"maps": [big], "anti": [0.1], "diag": [0.1]}] * 11)
    a["attn_rowmax_init"] = [0.5] * 200_000
    r["stdout"] = "x" * 300_000
    text = html.render(r)
    assert len(text) < 3_000_000
    for uri in _images(text):
        w, h = _image_size(uri)
        assert w <= 1000 and h <= 1200
    assert "characters not shown" in text
    assert len(re.findall(r"Layer \d+: mean anti-diagonal", text)) == figures.MAX_LAYERS
    assert f"only the first {figures.MAX_HEADS} heads are drawn" in text
    assert html.render_timings["total"] < 60


def test_escaping_of_student_text():
    evil = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    r = lite(stdout=evil, submission=evil)
    r["diagnoses"][0]["evidence"] = [evil]
    r["checks"][0]["detail"] = evil
    r["skipped_code"][0]["code"] = evil
    text = html.render(r)
    assert "<script>" not in text and "<img src=x" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_render_never_raises_on_nonsense():
    for r in ({}, {"verdict": "weird", "diagnoses": "x", "checks": [1, None, "a"], "artifacts": []},
              {"diagnoses": [{"confidence": "high", "evidence": None, "location": "here"}]}):
        text = html.render(r)
        assert text.startswith("<!doctype html>")


# -- source excerpts --------------------------------------------------------------------------------

def test_excerpt_of_a_python_file_marks_the_line(tmp_path):
    src = tmp_path / "student.py"
    src.write_text("\n".join(f"line_{i} = {i}" for i in range(1, 41)) + "\n")
    r = lite()
    r["diagnoses"][0]["location"] = {"file": "student.py", "line": 20}
    text = html.render(r, source_path=src)
    assert '<tr class="hit"><td class="n">20</td><td>line_20 = 20</td></tr>' in text
    assert "line_14 = 14" in text and "line_26 = 26" in text
    assert "line_13 = 13" not in text and "line_27 = 27" not in text


def test_excerpt_of_a_notebook_shows_the_cell():
    nb = json.loads(NOTEBOOK.read_text())
    n, cell = next((i, c) for i, c in enumerate(nb["cells"], start=1)
                   if c["cell_type"] == "code" and "def target_mask" in "".join(c["source"]))
    lines = "".join(cell["source"]).splitlines()
    k = next(i for i, l in enumerate(lines, start=1) if "tril" in l)
    r = lite()
    r["diagnoses"][0]["location"] = {"file": str(NOTEBOOK), "line": 999, "cell": n, "cell_line": k}
    text = html.render(r, source_path=NOTEBOOK)
    code_n = sum(c["cell_type"] == "code" for c in nb["cells"][:n])
    assert f"cell {n} (code cell {code_n}), line {k}" in text
    hit = re.search(r'<tr class="hit"><td class="n">(\d+)</td><td>([^<]*)</td>', text)
    assert hit and int(hit.group(1)) == k and "tril" in hit.group(2)
    assert f"cell {n} (code cell {code_n}) line {k}" in text      # the location line of the card


def test_excerpt_missing_file_says_so(tmp_path):
    r = lite()
    r["diagnoses"][0]["location"] = {"file": "gone.py", "line": 3}
    text = html.render(r, source_path=tmp_path / "gone.py")
    assert "gone.py:3 could not be shown" in text


def test_write_is_atomic_and_creates_parents(tmp_path):
    out = tmp_path / "a" / "b" / "report.html"
    html.write(lite(), out, source_path=None)
    assert out.read_text(encoding="utf-8").startswith("<!doctype html>")
    html.write(lite(verdict="clean", diagnoses=[]), out)
    assert "No problems found" in out.read_text(encoding="utf-8")
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.html"]   # no temp files left


# -- real results ------------------------------------------------------------------------------------

def _mutant_file(tmp_path_factory, mutant_id: str) -> Path:
    """The mutant's source, written where the check can read it."""
    import mutants
    m = mutants.get(mutant_id)
    path = tmp_path_factory.mktemp(mutant_id) / "submission.py"
    path.write_text(mutants.source(m))
    return path


def _run_check(path: Path, quick: bool) -> dict:
    """check_file with a generous wall-clock limit: these tests are about the report, and a shared CI
    machine can be several times slower than a laptop; a result that did not finish fails clearly."""
    from harness.api import check_file
    from harness.runner import Limits
    result = check_file(path, quick=quick, limits=Limits(timeout_s=900.0))
    assert result.get("error") is None, f"the check of {path} did not finish: {result.get('error')}"
    return result


@pytest.fixture(scope="module")
def pe_mutant(tmp_path_factory):
    """A --quick check of a mutant with a wrong positional-encoding formula (~10 s)."""
    path = _mutant_file(tmp_path_factory, "reversal-positional-encoding-formula")
    return _run_check(path, quick=True), path


@pytest.fixture(scope="module")
def reference_full():
    path = ROOT / "reference_model" / "reversal.py"
    return _run_check(path, quick=False), path


@pytest.fixture(scope="module")
def not_reversed_full(tmp_path_factory):
    path = _mutant_file(tmp_path_factory, "reversal-data-not-reversed")
    return _run_check(path, quick=False), path


# -- in a real browser ------------------------------------------------------------------------------

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]


def _chromium() -> str | None:
    for cand in (os.environ.get("MTXDIAG_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    return None


@pytest.fixture(scope="module")
def browser():
    exe = _chromium()
    if exe is None:
        pytest.skip("no chromium installed (apt-get install -y chromium, or set MTXDIAG_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright Python package is not installed (pip install playwright)")
    user_data = tempfile.mkdtemp(prefix="mtxdiag-chromium-")
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(user_data, executable_path=exe, headless=True,
                                                   args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 900},
                                                   offline=True)
        try:
            yield ctx
        finally:
            ctx.close()
            shutil.rmtree(user_data, ignore_errors=True)


def _open(browser, path: Path, name: str) -> dict:
    page = browser.new_page()
    problems = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning")
            else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url[:80]}"))
    try:
        page.goto(path.resolve().as_uri(), wait_until="load")
        state = page.evaluate("""() => ({
            images: document.images.length,
            decoded: Array.from(document.images).every(i => i.complete && i.naturalWidth > 0),
            text: document.body.innerText,
            overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
        })""")
        page.set_viewport_size({"width": 760, "height": 900})
        state["overflow_narrow"] = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth")
        page.emulate_media(media="print")
        state["overflow_print"] = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth")
        page.emulate_media(media="screen")
        page.set_viewport_size({"width": 1280, "height": 900})
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        state["problems"] = problems
        return state
    finally:
        page.close()


def _assert_loads(state, min_images=1):
    assert state["problems"] == []
    assert state["images"] >= min_images
    assert state["decoded"]
    assert state["overflow"] <= 0 and state["overflow_narrow"] <= 0 and state["overflow_print"] <= 0




def test_cross_attention_says_teacher_forced_and_shows_the_models_own_decode():
    """Issue 27: the maps are computed with the correct target fed in; a second picture shows the model's own
    greedy decode, so a model that leaks the future (perfect teacher-forced) shows its wrong decode."""
    from harness.report import figure_attention as F
    ca = _cross(L=6, heads=2, layers=2)
    rows = len(ca["tgt_in"])
    flat = [[round(1 / 6, 3)] * 6 for _ in range(rows)]
    ca["own"] = {"decoded": [11, 8, 8, 8, 8, 8, 8, 8], "layers": [flat, flat]}
    figs = F.cross_attention(ca)
    assert len(figs) == 3                                           # two layers, teacher-forced; then its decode
    assert all("teacher-forced" in f.alt for f in figs[:2])
    own = figs[-1]
    assert "own greedy decode" in own.alt and "6 of 7 decoded token(s) differ" in own.caption, own.caption
    ca["own"]["decoded"] = [11] + ca["src"][::-1] + [12]
    assert "the decode is the correct reversal" in F.cross_attention(ca)[-1].caption
    del ca["own"]
    assert len(F.cross_attention(ca)) == 2                          # an older result: no second picture
