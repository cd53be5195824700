"""The block lesson's code through a whole check (a sandboxed child); the block probes in-process: tests/unit/test_block.py."""
from __future__ import annotations

import pytest

from test_block import ROOT  # noqa: F401, F811 (fixtures, helpers)


@pytest.mark.parametrize("name", ["block_lesson.py", "block_lesson_forward_flag.py"])
def test_lesson_code_is_clean(name):
    from harness.api import check_file
    r = check_file(ROOT / "submissions" / name, quick=True)
    assert r["assignment"] == "block"
    assert r["verdict"] == "clean", [d["id"] for d in r["diagnoses"]]
    got = {c["id"]: c["status"] for c in r["checks"]}
    for id in ("pe-formula", "pe-relative", "block-rows-sum", "block-saturation", "block-permutation",
               "block-causal", "block-residual"):
        assert got.get(id) == "pass", (id, got)
    form = next(c for c in r["checks"] if c["id"] == "block-causal")["data"]["form"]
    assert form == ("init" if name == "block_lesson.py" else "forward")
