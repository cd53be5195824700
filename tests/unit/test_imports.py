"""The house: every harness module imports on its own in a fresh interpreter, and no module imports, directly or
through others, one that imports it back (read from the source with ast, lazy imports inside functions
included: a circle that only closes at run time is still a circle)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "harness"


def modules() -> dict[str, Path]:
    """harness module name -> file (packages by their __init__.py)."""
    out = {}
    for f in sorted(PKG.rglob("*.py")):
        parts = f.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def imports_of(name: str, path: Path, known: dict) -> set[str]:
    """The harness modules that `name`'s source imports anywhere (module level or inside functions)."""
    base = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "harness")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                mod = ".".join(parts + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "harness":
                continue
            for a in node.names:     # `from . import x` names a submodule when there is one
                found.add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod)
    return {m for m in found if m in known and m != name}


def cycles(graph: dict[str, set]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_in_the_harness():
    known = modules()
    graph = {name: imports_of(name, path, known) for name, path in known.items()}
    assert "harness.engine" in graph and "harness.outcome" in graph["harness.engine"]
    assert "harness.runner" not in graph["harness.engine"]        # the engine reads outcomes, not subprocesses
    assert cycles(graph) == []


def test_no_probe_imports_another_probes_private_names():
    """Shared helpers are public (probes/base.py, probes/locate.py, probes/common.py): `from .x import _y` is not."""
    bad = []
    for f in sorted((PKG / "child" / "probes").rglob("*.py")):      # probes/lm/ and its diag/ too
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                bad += [f"{f.name}:{node.lineno} {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert bad == []


def test_no_module_is_too_big_to_enter():
    """No harness module over about 450 lines, except data tables (there are none at present)."""
    big = {n: len(p.read_text().splitlines()) for n, p in modules().items()}
    assert {n: k for n, k in big.items() if k > 450} == {}




# ---- the house by role: folders layered, few rooms at the top --------------------------------------------------

def _room(name: str) -> str:
    """The room a module lives in: its folder under harness/ (harness.child.probes.base -> harness.child), or the
    top-level module itself."""
    parts = name.split(".")
    return ".".join(parts[:2])


def layers(graph: dict[str, set]) -> dict[str, set]:
    """The rooms' graph: an arrow from room A to room B when a module of A imports one of B."""
    out: dict[str, set] = {}
    for m, deps in graph.items():
        out.setdefault(_room(m), set()).update(_room(d) for d in deps if _room(d) != _room(m))
    return out


def test_the_room_graph_is_built_from_folders():
    g = layers({"harness.a.x": {"harness.b.y", "harness.a.z"}, "harness.a.z": set(), "harness.b.y": {"harness.top"},
                "harness.top": set()})
    assert g == {"harness.a": {"harness.b"}, "harness.b": {"harness.top"}, "harness.top": set()}
    assert cycles(layers({"harness.a.x": {"harness.b.y"}, "harness.b.y": {"harness.a.z"}, "harness.a.z": set()}))


def test_folders_import_each_other_only_downwards():
    """Every folder of harness/ (child, isolation, grading, repair, causes, report, cli, ...) and every top-level
    module is one room; the rooms' import graph has no circle, so each arrow runs down one order of the rooms
    (lazy imports inside functions included). A module that needs something from a room above it is in the wrong
    room, or the shared part belongs lower (protocol.py, source.py)."""
    known = modules()
    rooms = layers({name: imports_of(name, path, known) for name, path in known.items()})
    assert {"harness.child", "harness.isolation", "harness.grading"} <= set(rooms)
    assert cycles(rooms) == [], "rooms that import each other"


def test_the_top_level_holds_few_modules():
    """The pipeline and the shared declarations stay at the top; the rest lives in a folder by its role."""
    top = sorted(p.stem for p in PKG.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(top) <= 21, top
