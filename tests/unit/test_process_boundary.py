"""The parent never imports a child-side module (ARCHITECTURE.md, "What may import what"; issue 28 item 3):
every module the parent's commands reach through imports, lazy ones inside functions included, stays out of
the code that loads and probes a submission. What the parent needs of the child (wire constants, a
submission's text, a repository's layout) lives in torch-free shared modules: protocol.py, source.py."""
from __future__ import annotations

from test_imports import imports_of, modules

# The parent's entry points: the commands, the library API, the grader, the daemon, the engine and reports.
PARENT_ROOTS = ("harness.__main__", "harness.cli.main", "harness.grading.cli", "harness.api", "harness.isolation.daemon",
                "harness.cli.daemon", "harness.engine", "harness.selftest", "harness.cli.watch", "harness.grading.grade",
                "harness.grading.gradescope", "harness.runner", "harness.isolation.warm", "harness.report.html")
# Code that runs only in the sandboxed child (or the warm worker that forks it): the folder harness/child/, all of
# it. A new module is placed by the folder it goes into; nothing is listed by name.
CHILD_SIDE = ("harness.child",)
# Edges known to cross, in files another engineer owns this round: (importer, imported) -> why it is still
# here. The test below fails once one is gone, so that the exception is removed with it.
PENDING: dict = {}


def _child(name: str) -> bool:
    return any(name == c or name.startswith(c + ".") for c in CHILD_SIDE)


def _graph() -> dict[str, set[str]]:
    known = modules()
    return {n: imports_of(n, p, known) for n, p in known.items()}


def _reach(graph: dict) -> dict[str, str | None]:
    """Every module the parent's roots import, transitively, with the module that first imported it."""
    seen: dict[str, str | None] = {r: None for r in PARENT_ROOTS}
    todo = list(PARENT_ROOTS)
    while todo:
        n = todo.pop()
        for m in sorted(graph[n]):
            if m not in seen and (n, m) not in PENDING:
                seen[m] = n
                todo.append(m)
    return seen


def test_the_parent_imports_no_child_side_module():
    graph = _graph()
    assert set(PARENT_ROOTS) <= set(graph), sorted(set(PARENT_ROOTS) - set(graph))
    seen = _reach(graph)
    assert {"harness.protocol", "harness.outcome", "harness.isolation.result_pipe", "harness.isolation.repo_copy"} <= set(seen)
    chains = []
    for m in sorted(x for x in seen if _child(x)):
        chain = [m]
        while seen[chain[-1]] is not None:
            chain.append(seen[chain[-1]])
        chains.append(" <- ".join(chain))
    assert chains == [], "parent-side modules import child-side ones (move the shared part to a torch-free " \
                         f"module such as protocol.py or source.py): {chains}"


def test_each_pending_crossing_still_exists():
    graph = _graph()
    gone = [edge for edge in PENDING if edge[1] not in graph.get(edge[0], set())]
    assert gone == [], f"fixed: remove {gone} from PENDING"


def test_a_lazy_import_inside_a_function_is_seen(tmp_path):
    f = tmp_path / "fake.py"
    f.write_text("def later():\n    from .child import zygote\n    from .child.probes import base\n    return zygote, base\n")
    known = dict(modules(), **{"harness.fake": f})
    found = imports_of("harness.fake", f, known)
    assert {"harness.child.zygote", "harness.child.probes.base"} <= found and all(_child(m) for m in found)
