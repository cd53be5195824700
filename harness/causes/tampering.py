"""Tampering: the submission changed what the checks rely on, wrote to the grader's result channel, or
reaches into the grader's process (the cause document is load_failures.TAMPER).

Three checks feed it: `tamper` (the child: names of torch/builtins/harness functions that were replaced and
put back, modes or hooks left active, use of the grader's own code), `result-channel` (the parent: lines on
the private result pipe that did not come from the grader, a closed or replaced pipe) and `tamper-static`
(the parent: constructs in the file's text that reach into the grader) and `isolation` (the parent: the run
changed its warm worker, the child reported frame or heap introspection as it happened, or a location named a
file outside the submission's copy). The parent checks cannot be suppressed by the student's code.
"""
from . import load_failures
from .base import Finding, say

CAUSE = load_failures.TAMPER

CHECKS = ("result-channel", "tamper", "tamper-static", "isolation")


def diagnose(ev):
    failed = [c for c in (ev.failed(cid) for cid in CHECKS) if c]
    if not failed:
        return None
    location = next((c.get("location") for c in failed if c.get("location")), None)
    return Finding(1.0, [say(c) for c in failed], location, explains=CHECKS)
