"""The probe registry (in-process); the side process: tests/integration/test_child_side.py."""
from __future__ import annotations



def test_probe_ids_are_unique_within_an_assignment():
    """The two processes' checks are merged by probe id."""
    from harness.probes import PROBES
    for a in ("reversal", "block", "lm"):
        ids = [p.id for p in PROBES if a in p.assignments]
        assert len(ids) == len(set(ids)), a
