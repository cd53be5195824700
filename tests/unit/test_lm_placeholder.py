"""lm placeholders raise only when used (in-process); lm checks end to end: tests/integration/test_lm_check.py."""
from __future__ import annotations

import pytest


def test_placeholder_raises_only_when_used():
    from harness.child.lm_loader import MissingDependency, Placeholder
    p = Placeholder("regex", "ModuleNotFoundError: No module named 'regex'", "regex")
    assert p.compile is not None and p["x"] is p and (p | None) is p    # annotations and attribute chains
    with pytest.raises(MissingDependency) as e:
        p.compile("a+")
    assert e.value.name == "regex"

    class Tok(p):           # a class deriving from a missing base defines, and fails only when built
        pass
    with pytest.raises(ModuleNotFoundError):
        Tok()
