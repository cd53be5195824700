"""Load a pack's submission folder in the model server (issue 45): the prober's half of child/pack_loader.py.

The prober never imports the submission. It reads the copied folder's files as text: the pack's first file (its
syntax error is the load's failure, with its line), the edition (packs/folder.py, from the files' text), and for
each module the top-level statements that run (loader.filter_module: the same definitions pack_loader runs).
It sends those to the server (child/modelserver.py) with each binding's target; the server imports them and says
for each target whether it exists, with its kind, its class, its file and its first line. The record the probes
read (probes/packs.py) is pack_loader's: each present piece is a proxy (probes/roles/remote.py), an absent one has
its reason, a stub (judged here from the file's text at the line the server named) is not implemented.
"""
from __future__ import annotations

import os
import types

from ..packs.api import Pack
from ..packs.folder import edition_of
from .loader import SubmissionError, filter_module, read_source
from .pack_loader import KEY, read_text_at, stub_in
from .probes.roles import remote

MAX_FILES = 2000
RESERVED = frozenset(__import__("sys").stdlib_module_names) | {"torch", "numpy"}   # never served as the student's


def load(path: str, display: str | None, pack: Pack, timeout_s: float, fd: int, timings: dict | None = None) -> tuple:
    """(Source of the pack's first file, a namespace module holding a proxy per present component); `timings`: the
    result's, where the server's round trips are counted (remote.Client.costs)."""
    root = os.path.realpath(path)
    display = (display or path).rstrip("/")
    first = os.path.join(root, pack.files[0])
    if not os.path.isfile(first):
        raise SubmissionError("missing-adapters", f"the folder has no {pack.files[0]} (the {pack.name} "
                              f"assignment's first file)")
    with open(first, "rb") as f:
        source = read_source(f"{display}/{pack.files[0]}", f.read())
    source.run_path = first
    filter_module(source)           # a syntax error in the main file is the submission's load failure, with its line
    modules, texts, skipped = plan(root, display)
    edition = edition_of(pack, lambda rel: read_text_at(root, rel))
    name = edition.name if edition is not None else None
    bindings = pack.bindings_for(name)
    client = remote.Client(fd, {rel: t.count("\n") + 1 for rel, t in texts.items()}, costs=timings)
    try:
        ans = client.request("load", timeout_s=timeout_s + 10, modules=modules, timeout=float(timeout_s),
                             targets={b.component: b.target for b in bindings})
    except remote.RemoteFailure as e:
        kind = "timeout" if "hangs" in str(e) else "definition-error"
        raise SubmissionError(kind, f"the model server could not load the submission: {type(e).__name__}: {e}",
                              e.line) from None
    got = ans.get("targets") if isinstance(ans.get("targets"), dict) else {}
    loaded = [f for f in ans.get("loaded") or () if isinstance(f, str) and f in texts]
    module = types.ModuleType("submission")
    module.__file__ = first
    record = {"pack": pack, "edition": name, "objects": {}, "absent": {}, "not_implemented": {}, "texts": {},
              "stub_at": {}, "server": client}
    for b in bindings:
        info = got.get(b.component)
        if not isinstance(info, dict) or not info.get("ok"):
            why = info.get("why") if isinstance(info, dict) and isinstance(info.get("why"), str) else \
                "absent: the model server did not find it"
            record["absent"][b.component] = why[:600]
            continue
        rel = info.get("file") if info.get("file") in texts else None
        shown = f"{display}/{rel}" if rel else None
        obj = proxy(client, b, info, shown)
        record["objects"][b.component] = obj
        setattr(module, b.component.replace(".", "_"), obj)
        first_line = info.get("first") if type(info.get("first")) is int else 0
        stub, line = stub_in(texts.get(rel), first_line) if rel else ("", 0)
        if stub:
            record["not_implemented"][b.component] = stub
            record["stub_at"][b.component] = {"file": shown, "line": line}
    for rel in loaded:
        record["texts"][f"{display}/{rel}"] = texts[rel]
        source.skipped.extend(dict(s, file=f"{display}/{rel}") for s in skipped.get(rel, ()))
    setattr(module, KEY, record)
    return source, module


def proxy(client, binding, info: dict, shown: str | None):
    """The RemoteClass of a class target, or a method target's RemoteFunction (its class a RemoteClass)."""
    cls = remote.remote_class(client, binding.component, info, shown)
    if info.get("kind") == "class":
        return cls
    name = binding.target.rsplit(".", 1)[-1]
    return remote.RemoteFunction(cls, name if name.isidentifier() else "method", shown)


def plan(root: str, display: str) -> tuple[dict, dict, dict]:
    """({module name: {file, keep (the lines of the top-level statements that run), package, error}},
    {file: text}, {file: skipped statements}) for every .py file under `root`, read as text."""
    modules: dict = {}
    texts: dict = {}
    skipped: dict = {}
    for base, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d.isidentifier())
        rel_dir = os.path.relpath(base, root)
        parts = [] if rel_dir == "." else rel_dir.split(os.sep)
        if parts:
            modules.setdefault(".".join(parts), {"file": None, "package": True})
        for f in sorted(files):
            if not f.endswith(".py") or not f[:-3].isidentifier() or len(texts) >= MAX_FILES:
                continue
            rel = "/".join(parts + [f])
            name = ".".join(parts) if f == "__init__.py" else ".".join(parts + [f[:-3]])
            if not name or name.split(".")[0] in RESERVED:
                continue
            with open(os.path.join(base, f), "rb") as fh:
                raw = fh.read()
            entry: dict = {"file": rel, "package": f == "__init__.py"}
            try:
                src = read_source(f"{display}/{rel}", raw)
                texts[rel] = src.text
                tree = filter_module(src)
                entry["keep"] = [s.lineno for s in tree.body]
                skipped[rel] = src.skipped
            except SubmissionError as e:
                entry["error"] = f"{display}/{rel} line {e.line}: {e.message}"
            modules[name] = entry
    return modules, texts, skipped
