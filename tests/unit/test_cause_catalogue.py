"""docs/causes.md is the causes' own documents, rendered: a cause added, renamed or reworded without
re-rendering the file fails here (`python -m harness.causes.catalogue > docs/causes.md`)."""
from __future__ import annotations

from pathlib import Path

from harness.causes import CAUSES
from harness.causes.catalogue import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "causes.md"


def test_the_catalogue_is_current():
    assert DOC.read_text(encoding="utf-8") == render(), \
        "docs/causes.md is stale: python -m harness.causes.catalogue > docs/causes.md"


def test_every_cause_has_its_own_section_with_its_fix():
    text = render()
    for c in CAUSES:
        assert f"## `{c.id}`: {c.title}" in text
        assert " ".join(c.fix.split()) in text
