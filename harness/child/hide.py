"""While the student's code runs, the grader's own modules are not in sys.modules under their names.

The harness, the reference solution and the mutants live in the child's process; `sys.modules["reference_model.
reversal"]` or `sys.modules["harness.child.main"]` would hand the student's code the reference model or the
grader's state without an import statement for the text scan to see. Around every call into student code
(GuardedContext.student) `Hidden` takes those entries out and puts the very same objects back afterwards:

* an import of one of them meanwhile by the grader's own code (a function-level import in harness code that
  runs inside the call) is served the hidden module itself, so nothing of the harness is loaded twice (it
  is then back in sys.modules until the call ends: none of the code that runs inside calls does that now);
* an import of any grader module by anyone else (the student's code, a library it called) fails with
  ModuleNotFoundError and is reported (`found`); a copy that got into sys.modules anyway is dropped.

The module objects themselves are unchanged (the import system's `__spec__` write is undone), so the guard's
record of sys.modules holds.
"""
from __future__ import annotations

import importlib.util
import sys

from ..identity import is_grader_name


class _Serve:
    """A loader that hands back the hidden module itself."""

    def __init__(self, module):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        pass


class Hidden:
    def __init__(self, modules: dict, grader_roots=(), report=None, is_student=None):
        self.modules = modules             # the interpreter's own dict (guard._sysmods), even if rebound
        self.grader = tuple(grader_roots)  # folders of the grader's files: whose imports are served
        self.report = report               # report(name, line): an import by someone else
        self.is_student = is_student       # is_student(filename): the line is the student's to show
        self.names, self.known = [], -1
        self.saved: dict = {}
        self.specs: dict = {}
        self.depth = 0
        self.found: list[str] = []

    # -- the window -------------------------------------------------------------
    def __enter__(self):
        self.depth += 1
        if self.depth > 1:                 # nested calls: already hidden
            return self
        mods = self.modules
        if len(mods) != self.known:        # modules came or went since the last call: list the grader's again
            self.names = [k for k in list(mods) if k != "__main__" and is_grader_name(k)]
            self.known = len(mods)
        self.saved = {k: mods.pop(k) for k in self.names if k in mods}
        self.specs = {k: m.__dict__.get("__spec__") for k, m in self.saved.items()}
        self.count = len(mods)
        sys.meta_path.insert(0, self)
        return self

    def __exit__(self, *exc):
        self.depth -= 1
        if self.depth:
            return False
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        mods = self.modules
        if len(mods) != self.count:        # something was imported: a grader module loaded afresh is dropped
            for k in [k for k in list(mods) if k != "__main__" and is_grader_name(k)]:
                if mods[k] is not self.saved.get(k):
                    del mods[k]
                    self._found(k, None)
        mods.update(self.saved)
        for k, spec in self.specs.items():
            m = self.saved[k]
            if m.__dict__.get("__spec__") is not spec:
                m.__dict__["__spec__"] = spec
        self.saved = {}
        return False

    # -- the finder -------------------------------------------------------------
    def find_spec(self, name, path=None, target=None):
        if not is_grader_name(name) or name == "__main__":
            return None
        importer, line = self._importer()
        module = self.saved.get(name)
        if importer == "grader":
            return None if module is None else importlib.util.spec_from_loader(
                name, _Serve(module), is_package=hasattr(module, "__path__"))
        self._found(name, line)
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    def _importer(self):
        """('grader', None) when the import was asked for by the grader's own code: the nearest frame that is
        either the grader's or the student's is the grader's (the import system's and libraries' frames in
        between - importlib.import_module, torch.load's unpickler - are not the importer, whoever called them)."""
        f = sys._getframe(2)
        torch_dir = _torch_dir()
        while f is not None:
            name = f.f_code.co_filename
            if self.grader and name.startswith(self.grader):
                return "grader", None
            if torch_dir and name.startswith((torch_dir + "_dynamo/", torch_dir + "fx/")):
                # torch.compile's tracer looking up the modules of the grader's hooks on the stack: torch's own
                # behaviour (test_legit). Only the tracer: torch.load's unpickler would serve a crafted pickle
                # the grader's modules
                return "grader", None
            if self.is_student is not None and self.is_student(name):
                return "other", f.f_lineno
            f = f.f_back
        return "other", None

    def _found(self, name, line):
        if name not in self.found and len(self.found) < 20:
            self.found.append(name)
            if self.report is not None:
                self.report(name, line)


def _torch_dir() -> str:
    t = sys.modules.get("torch")
    f = getattr(t, "__file__", None) if t is not None else None
    return (f.rsplit("/", 1)[0] + "/") if isinstance(f, str) else ""
