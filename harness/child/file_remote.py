"""Load a one-file pack's submission in the model server (issue 45): the prober's half of child/loader.py.

The prober never runs the file. It reads it as text (loader.read_source, its syntax error is the load's failure
with its line), keeps the top-level statements the in-process loader runs (loader.filter_module) and sends their
lines to the server (child/modelserver.py), which imports the file's copy as module `submission` running only
those, and says for each contract name (the assignment's `required` and `optional`) whether it is defined, with
its kind and first line. A top-level statement that raises is the load's failure (its kind as loader.load names
it, the line the server names, checked against the file's length). The namespace the probes read (ctx.module)
holds a proxy per name defined (probes/roles/remote.py: a RemoteClass with the student's constructor and forward
signatures, a RemoteCallable for a function); the prober's recorders reach the server through them
(probes/roles/remote_ops.py).
"""
from __future__ import annotations

import types

from ..packs.api import Pack
from . import on_demand
from .loader import SubmissionError, _bound, filter_module, read_source
from .probes.roles import remote, remote_args

REL = "submission.py"       # the copy's name in the server's folder (isolation/split.start_server)
KINDS = {"ModuleNotFoundError": "missing-module", "SystemExit": "exit-during-load", "TimeoutError": "timeout"}


def load(path: str, display: str | None, pack: Pack, timeout_s: float, fd: int, timings: dict | None = None):
    """(the submission's Source, a namespace module holding a proxy per contract name it defines)."""
    with open(path, "rb") as f:
        source = read_source(display or path, f.read())
    source.run_path = path
    tree = filter_module(source)            # a syntax error is the load's failure, with its line
    names = tuple(pack.assignment.required) + tuple(pack.assignment.optional)
    client = remote.Client(fd, {REL: source.text.count("\n") + 1}, costs=timings)
    client.code_path, client.code_rel = source.code_path, REL
    try:
        ans = client.request("load", timeout_s=timeout_s + 10, timeout=float(timeout_s),
                             modules={"submission": {"file": REL, "package": False,
                                                     "keep": [s.lineno for s in tree.body]}},
                             targets={n: f"submission:{n}" for n in names})
    except remote.RemoteFailure as e:
        kind = "timeout" if "hangs" in str(e) else "definition-error"
        raise SubmissionError(kind, f"the model server could not load the submission: {type(e).__name__}: {e}",
                              e.line) from None
    got = ans.get("targets") if isinstance(ans.get("targets"), dict) else {}
    for info in got.values():               # the file's top level raised: the load fails as in process
        err = info.get("error") if isinstance(info, dict) else None
        if isinstance(err, dict):
            name = err.get("type") if isinstance(err.get("type"), str) and err["type"].isidentifier() else "Exception"
            message = str(err.get("message"))[:1000]
            raise SubmissionError(KINDS.get(name, "definition-error"), f"{name}: {message}" if message else name,
                                  client.line_in(REL, err.get("line")))
    module = types.ModuleType("submission")
    module.__file__ = source.code_path
    setattr(module, on_demand.SERVER_NAMES, ServerNames(client, tree))
    for n in names:
        info = got.get(n)
        if not isinstance(info, dict) or not info.get("ok"):
            continue
        if info.get("kind") == "class":
            cls = remote.remote_class(client, n, info, display, methods=True)
            client.classes[n] = cls
            setattr(module, n, cls)
        else:
            fn = remote.RemoteCallable(client, n, display)
            if isinstance(info.get("params"), list):        # the student's signature as the server read it
                fn.__signature__ = remote_args.function_signature(info)
            setattr(module, n, fn)
    return source, module


class ServerNames(dict):
    """The names module `submission` has in the server (those its kept statements bind, then those provided):
    what child/on_demand.py reads to judge a skipped statement, and where it runs one, in the server (request
    `define`: the statement starting at that line, which the server reads from its own copy)."""

    def __init__(self, client, tree):
        super().__init__((n, None) for stmt in tree.body for n in _bound(stmt))
        self.client = client

    def run_statement(self, stmt, timeout_s: float) -> None:
        self.client.request("define", timeout_s=timeout_s + 10, module="submission", line=stmt.lineno,
                            timeout=timeout_s)
        self.update((n, None) for n in _bound(stmt))
