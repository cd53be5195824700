"""Where an lm adapter's wrong kind of result was made (probes/lm_training._result_made_at): a generator is
located at its function in the student's files (it yields where it should return), anything else at the
adapter's return; a generator of code outside the student's files gives no line of theirs."""
from __future__ import annotations

import types

from harness.child import lm_loader
from harness.child.probes.lm import training as lm_training


def test_a_generator_is_located_at_its_function(monkeypatch):
    ns: dict = {}
    exec(compile("\n\ndef batches(data):\n    for d in data:\n        yield d\n", "/copy/pkg/data.py", "exec"), ns)
    monkeypatch.setattr(lm_loader.STATE, "files", {"/copy/pkg/data.py": "pkg/data.py"})
    ctx = types.SimpleNamespace(cache={"lm_returned_at": {"get-batch": {"file": "tests/adapters.py", "line": 9}}})
    assert lm_training._result_made_at(ctx, ns["batches"]([1]), "get-batch") == {"file": "pkg/data.py", "line": 3}
    # not a generator, or one from outside the student's files: the adapter's return
    assert lm_training._result_made_at(ctx, [1, 2, 3], "get-batch") == {"file": "tests/adapters.py", "line": 9}
    assert lm_training._result_made_at(ctx, (x for x in [1]), "get-batch")["file"] == "tests/adapters.py"
