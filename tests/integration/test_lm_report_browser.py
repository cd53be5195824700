"""The lm report in headless chromium (a browser process); the lm sections in-process: tests/unit/test_lm_report.py."""
from __future__ import annotations

import re
import pytest
from harness.child.probes.lm.common import COMPONENTS
from harness.report import html
from test_report import _assert_loads, _open, _sections, browser  # noqa: F401 (browser: a fixture)

from test_lm_report import lm_checked  # noqa: F401, F811 (fixtures, helpers)


@pytest.mark.slow
@pytest.mark.browser
def test_browser_lm_reference_and_rope_mutant(browser, lm_checked, tmp_path):  # noqa: F811
    ref, mut = lm_checked["reference"]["artifacts"], lm_checked["rope-mutant"]["artifacts"]
    assert ref["lm_rope_scores"]["spread"] < 1e-5 and mut["lm_rope_scores"]["spread"] > 0.1
    assert lm_checked["rope-mutant"]["diagnoses"][0]["component"] == "rope"
    for name, result in lm_checked.items():
        out = html.write(result, tmp_path / f"lm-{name}.html")
        state = _open(browser, out, f"lm-{name}")
        _assert_loads(state, min_images=3)
        page = browser.new_page()
        try:
            page.goto(out.resolve().as_uri(), wait_until="load")
            dom = page.evaluate("""() => {
                const box = e => e ? e.getBoundingClientRect() : null;
                const img = document.querySelector('#lm-rope figure img');
                const b = box(img);
                return {rows: document.querySelectorAll('#components tr[id^="component-"]').length,
                        rope: b ? {w: b.width, h: b.height, natural: img.naturalWidth} : null,
                        causal: document.querySelectorAll('#lm-causal figure img').length,
                        caption: (document.querySelector('#lm-rope figcaption') || {}).innerText || ''};
            }""")
        finally:
            page.close()
        assert dom["rows"] == len(COMPONENTS)
        assert dom["rope"] and dom["rope"]["w"] > 200 and dom["rope"]["h"] > 100 and dom["rope"]["natural"] > 0
        assert dom["causal"] == 1
        spread = re.search(r"spread at equal offsets ([0-9.e+-]+)", dom["caption"])
        assert spread, dom["caption"]
        if name == "reference":
            assert "lie on the reference's curve" in dom["caption"] and float(spread.group(1)) < 1e-5
        else:
            assert "depends on the positions themselves" in dom["caption"] and float(spread.group(1)) > 0.1
