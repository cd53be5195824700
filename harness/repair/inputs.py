"""Inputs a function was given or computed and never read: the statement at the line uses the wrong name.

`x = self.n2(x + self.drop(a))` where `c` (the cross-attention's output) is never read: `a` -> `c`;
`self.cross_attn(x, x, x, tgt_mask)` where `memory` and `src_mask` are never read: keys/values from memory,
the source mask. Each edit is (kind, label, make) like statements.edits.
"""
from __future__ import annotations

import libcst as cst

from .sites import code as _code

MAX_EDITS = 6
KINDS = frozenset({"unused-input"})      # every kind of edit this family makes (edit.pending)


class _Names(cst.CSTVisitor):
    def __init__(self):
        self.count = {}

    def visit_Name(self, node):
        self.count[node.value] = self.count.get(node.value, 0) + 1


def innermost(col, line):
    """The smallest function that holds `line`, by its lines (a nested def lies inside the one around it)."""
    return min(((f, e - s) for f, s, e in col.nodes if isinstance(f, cst.FunctionDef) and s <= line <= e),
               key=lambda x: x[1], default=(None, 0))[0]


_MEMO: dict = {}


def per_function(fn, make):
    """make(fn), once per function node and maker: the editors of every line of one function ask alike."""
    key = (id(fn), make)
    hit = _MEMO.get(key)
    if hit is None or hit[0] is not fn:
        if len(_MEMO) > 256:
            _MEMO.clear()
        hit = _MEMO[key] = (fn, make(fn))
    return hit[1]


def name_counts(fn) -> dict:
    """How often each name occurs in fn (read it, never change it: it is shared)."""
    v = _Names()
    fn.visit(v)
    return v.count


def edits(module: cst.Module, col, a: int, b: int) -> list:
    fn = innermost(col, a)
    if fn is None:
        return []
    counts = per_function(fn, name_counts)
    params = [p.name.value for p in fn.params.params + fn.params.kwonly_params]
    local = set(params) | {n for n, k in counts.items() if k > 1}
    idle = [n for n, k in counts.items() if k == 1 and n not in ("self", fn.name.value) and not n.startswith("_") and
            (n in params or n in col.names)]
    made = per_function(fn, _assigned) if any(n not in params for n in idle) else set()
    idle = [n for n in idle if n in params or n in made]
    if not idle:
        return []
    on_line = [(node, s) for node, s, e in col.nodes if a <= s and e <= b]
    out = []
    masks = [n for n in idle if "mask" in n.lower()]
    values = [n for n in idle if "mask" not in n.lower()]
    for node, _ in on_line:       # a call fed its queries as keys/values too: keys/values (and mask) from the idle
        if isinstance(node, cst.Call) and len(node.args) >= 3 and all(x.keyword is None for x in node.args[:3]) \
                and _code(node.args[1].value) == _code(node.args[2].value) and values:
            args = list(node.args)
            for i in (1, 2):
                args[i] = args[i].with_changes(value=cst.Name(values[0]))
            if len(args) > 3 and masks and isinstance(args[3].value, cst.Name):
                args[3] = args[3].with_changes(value=cst.Name(masks[0]))
            out.append(("unused-input", f"keys and values from {values[0]}" + (f", mask {masks[0]}" if
                        len(args) > 3 and masks else ""), lambda n=node, x=args: module.deep_replace(
                            n, n.with_changes(args=x)).code))
    skip = set()                  # names that are not reads: attributes' names, callees, assignment targets
    for node, _ in on_line:
        if isinstance(node, cst.Attribute):
            skip.add(id(node.attr))
        if isinstance(node, cst.Call):
            skip.add(id(node.func))
        if isinstance(node, cst.AssignTarget):
            skip.update(id(t) for t in ([node.target] if not isinstance(node.target, cst.Tuple) else
                                        [e.value for e in node.target.elements]))
    reads = [n for n, _ in on_line if isinstance(n, cst.Name) and id(n) not in skip and n.value in local
             and n.value != "self"]
    reads.sort(key=lambda n: n.value in params)      # a computed local misnamed before a parameter
    for node, _ in on_line:       # a constant where the function's own (unread) parameter was meant
        if isinstance(node, cst.Arg) and isinstance(node.value, (cst.Integer, cst.Float)) and node.keyword is None:
            for n in [p for p in values if p in params][:2]:
                out.append(("unused-input", f"{n} (a parameter never read) instead of {node.value.value}",
                            lambda o=node, x=n: module.deep_replace(o, o.with_changes(value=cst.Name(x))).code))
    for node in reads:            # one name read where an idle one was meant
        for n in (values if "mask" not in node.value.lower() else masks):
            if n != node.value and n not in {_code(t) for t in reads if t is not node} | _targets(on_line):
                out.append(("unused-input", f"{n} (never read) instead of {node.value}",
                            lambda o=node, x=n: module.deep_replace(o, cst.Name(x)).code))
    return out[:MAX_EDITS]


def _targets(on_line) -> set:
    return {_code(t) for n, _ in on_line if isinstance(n, cst.AssignTarget) for t in [n.target]}


def _assigned(fn) -> set:
    """Every name with `name = ...` somewhere in fn (a local that is computed, then never read): one walk."""
    found = set()

    class V(cst.CSTVisitor):
        def visit_AssignTarget(self, node):
            for t in ([node.target] if not isinstance(node.target, cst.Tuple) else
                      [e.value for e in node.target.elements]):
                if isinstance(t, cst.Name):
                    found.add(t.value)
    fn.visit(V())
    return found
