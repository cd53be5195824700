"""Reports of real checks (sandboxed children) and the page in headless chromium (a browser process); the renderer on synthetic results in-process: tests/unit/test_report.py."""
from __future__ import annotations

import re
import pytest
from harness.report import html

from test_report import ROOT, _assert_loads, _open, _sections, browser, not_reversed_full, pe_mutant, reference_full, synthetic  # noqa: F401 (fixtures, helpers)


def test_a_report_draws_without_matplotlib():
    """The figures are SVG written by hand (svg.py): rendering a full report imports no matplotlib, which cost
    a check ~0.8 s to import and ~1.2 s to draw with, in the process that writes grades too."""
    import subprocess
    import sys
    code = ("import sys; sys.path[:0] = ['tests', 'tests/unit']; from test_report import synthetic; "
            "from harness.report import html; t = html.render(synthetic()); "
            "print(t.count('data:image/svg+xml'), 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    n, imported = out.stdout.split()
    assert int(n) >= 8 and imported == "False"


def test_quick_mutant_report(pe_mutant, tmp_path):
    result, path = pe_mutant
    assert result["diagnoses"] and result["diagnoses"][0]["id"] == "positional-encoding-formula"
    out = html.write(result, tmp_path / "pe.html", source_path=path)
    text = out.read_text(encoding="utf-8")
    secs = _sections(text)
    assert "<img" in secs["positional"]
    assert "differs from the formula" in secs["positional"]
    assert '<tr class="hit">' in text                                       # the excerpt of the reported line
    assert "--quick" in secs["cross-attention"] and "--quick" in secs["training"]


@pytest.mark.slow
def test_reference_report_shows_the_anti_diagonal(reference_full, tmp_path):
    result, path = reference_full
    text = html.write(result, tmp_path / "ref.html", source_path=path).read_text(encoding="utf-8")
    m = re.search(r"Anti-diagonal mass: <strong>([0-9.]+)</strong>", text)
    assert m and float(m.group(1)) > 0.3
    assert "pattern: <strong>anti-diagonal</strong>" in text
    layers = result["artifacts"]["cross_attention"]["layers"]
    assert len(re.findall(r"Layer \d+: mean anti-diagonal mass [0-9.]+ over \d+ head", text)) == len(layers)
    assert "No problems found" in text


@pytest.mark.slow
def test_data_not_reversed_report_shows_a_diagonal(not_reversed_full, tmp_path):
    result, path = not_reversed_full
    pattern = next(c for c in result["checks"] if c["id"] == "cross-attn-pattern")
    assert pattern["measured"]["kind"] == "diagonal"
    text = html.write(result, tmp_path / "nr.html", source_path=path).read_text(encoding="utf-8")
    assert "pattern: <strong>diagonal</strong>" in text
    assert result["diagnoses"][0]["title"] in text


@pytest.mark.browser
def test_browser_synthetic(browser, tmp_path):
    out = html.write(synthetic(), tmp_path / "synthetic.html")
    state = _open(browser, out, "synthetic")
    _assert_loads(state, min_images=8)
    assert "Attention scores are not divided by sqrt(d_k)" in state["text"]


@pytest.mark.browser
def test_browser_malformed(browser, tmp_path):
    r = synthetic()
    for k in r["artifacts"]:
        r["artifacts"][k] = [None, "x"]
    out = html.write(r, tmp_path / "malformed.html")
    state = _open(browser, out, "malformed")
    _assert_loads(state, min_images=0)
    assert "Attention scores are not divided by sqrt(d_k)" in state["text"]


@pytest.mark.browser
def test_browser_quick_mutant(browser, pe_mutant, tmp_path):
    result, path = pe_mutant
    out = html.write(result, tmp_path / "pe.html", source_path=path)
    state = _open(browser, out, "quick-positional-encoding-formula")
    _assert_loads(state, min_images=4)
    assert result["diagnoses"][0]["title"] in state["text"]
    assert "--quick" in state["text"]


@pytest.mark.slow
@pytest.mark.browser
def test_browser_reference_and_not_reversed(browser, reference_full, not_reversed_full, tmp_path):
    for (result, path), name in ((reference_full, "reference"), (not_reversed_full, "data-not-reversed")):
        out = html.write(result, tmp_path / f"{name}.html", source_path=path)
        state = _open(browser, out, name)
        _assert_loads(state, min_images=8)
        assert "Anti-diagonal mass:" in state["text"]
        for d in result["diagnoses"]:
            assert d["title"] in state["text"]
