# hostile: imports the grader and patches its check function, with the file padded past two million characters
# so that a size-limited text scan gives up; the test fills in the padding below
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave2.py appends it to its base)
{{PAD}}
import harness.child.probes.base as _hb                                                   # OP import load
