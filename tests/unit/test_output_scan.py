"""tests/output_scan.py, the checker the integration tests run over a check's terminal, HTML and JSON: it finds
a Python None, a nan and a word cut in two, and leaves prose, code and names alone."""
from __future__ import annotations

from output_scan import html_text, scan


def _kinds(problems):
    return sorted({p.split(": ")[1] for p in problems})


def test_it_finds_none_nan_and_cut_words_in_the_terminal():
    text = "\n".join(["  evidence decode-accuracy: measured 0.12, expected reference after the same training: None",
                      "  evidence loss nan -> nan",
                      "  evidence lm-rope raised ImportErro",
                      "  note (nothing correc)"])
    got = scan(terminal=text)
    assert _kinds(got) == ["cut inside a word ('ImportErro')", "cut inside a word ('correc')", "shows None",
                           "shows nan"]


def test_it_leaves_prose_code_and_names_alone():
    text = "\n".join(["  1. inf-mask-nan  NaN when a whole row is masked (0/0 = NaN)",
                      "     at       model.py:12  │ if mask is None: x = float('nan')",
                      "  evidence run_rmsnorm returned None; Embedding(n, d, device=None)",
                      "  evidence the mask is applied to `scores.masked_fill(mask == 0, None)`",
                      "  evidence the forward pass raised…",
                      "  see Rotary.forward in nn_mha_ctor_flag.py and /tmp/x/correc"])
    assert scan(terminal=text) == []


def test_html_visible_text_only():
    page = ("<html><head><style>.x{}</style><script>var a = None;</script><title>r</title></head><body>"
            "<p>Expected: <b>reference</b> after the same training: None of the mass</p>"
            "<div class='src'><table><tr><td>if x is None: pass</td></tr></table></div>"
            "<pre>nan</pre><br><td>NaN</td></body></html>")
    assert "var a = None;" not in html_text(page) and "if x is None: pass" not in html_text(page)
    assert _kinds(scan(html=page)) == ["shows None", "shows nan"]


def test_json_strings_but_the_raw_ones():
    result = {"stdout": "loss nan", "skipped_code": [{"code": "x = None", "reason": "an assignment"}],
              "checks": [{"id": "a", "expected": "reference: None", "detail": "ok"}],
              "diagnoses": [{"evidence": ["ImportErro…"]}]}
    got = scan(result=result)
    assert [p.split(":")[0] for p in got] == ["result.checks[0].expected", "result.diagnoses[0].evidence[0]"]


def test_a_repairs_patch_and_the_students_own_lines_are_code_not_prose():
    from output_scan import scan
    term = ("  repair   verified at line 64\n"
            "     @@ -63,3 +63,3 @@\n"
            "              if mask is not None:\n"
            "     -        scores = Q @ K.transpose(-2, -1)\n"
            "     +        scores = (Q @ K.transpose(-2, -1)) / Q.size(-1) ** 0.5\n"
            "  fix      model.fixed.py\n")
    assert scan(terminal=term) == []
    assert scan(terminal=term + "  measured None\n")            # prose after the patch is read again
    mine = "        causal = torch.ones(T, T)[None, None]   # (1,1,T,T)\n"
    assert scan(terminal=mine, sources=[mine]) == [] and scan(terminal=mine)
