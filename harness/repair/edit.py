"""Candidate repairs of one line of the student's file: the file's text with one small edit made there.

The file is parsed with LibCST and only the edited node is replaced (module.deep_replace), so every other
character of the file - formatting, comments, blank lines - is the student's own. Runs in the parent on the
text alone: nothing is imported or executed.
"""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from . import calls, inputs, order, sites, statements

MAX_CANDIDATES = 24


@dataclass(frozen=True)
class Candidate:
    kind: str       # the family of edit (softmax-axis, triangle, polarity, ...): catalogue.py orders by it
    label: str      # what the edit does, in words
    code: str       # the whole patched file
    line: int       # the line of the statement it edits


class _Collect(cst.CSTVisitor):
    """Every node with its position, and the innermost simple statement holding each line."""
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self):
        self.nodes, self.stmts, self.names = [], [], set()
        self.pairs = {}      # a, b = ...: each name -> the others assigned with it (tgt_in <-> tgt_out)

    def on_visit(self, node) -> bool:
        pos = self.get_metadata(PositionProvider, node, None)
        if pos is not None:
            self.nodes.append((node, pos.start.line, pos.end.line))
            if isinstance(node, cst.SimpleStatementLine):
                self.stmts.append((node, pos.start.line, pos.end.line))
        if isinstance(node, cst.Name):
            self.names.add(node.value)
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Tuple):
            names = [e.value.value for e in node.targets[0].target.elements if isinstance(e.value, cst.Name)]
            for n in names:
                self.pairs.setdefault(n, set()).update(x for x in names if x != n)
        return True


def parse(source: str):
    """(wrapper, collected) or None when LibCST cannot parse the text (a notebook, a syntax error)."""
    try:
        wrapper = MetadataWrapper(cst.parse_module(source))
        col = _Collect()
        wrapper.visit(col)
    except Exception:          # noqa: BLE001 - any text LibCST refuses is simply not repaired
        return None
    return wrapper, col


def span(col: _Collect, line: int) -> tuple[int, int]:
    """The lines of the smallest simple statement that holds `line` (a call over several lines is one edit
    site); the line alone when it is a compound statement's header."""
    best = None
    for node, a, b in col.stmts:
        if a <= line <= b and (best is None or b - a < best[1] - best[0]):
            best = (a, b)
    return best or (line, line)


def candidates(source: str, line: int, kinds: tuple | None = None) -> list[Candidate]:
    """Every small edit the editors know for the statement at `line` (only `kinds` when given), each
    producing a file that still parses; duplicates (the same patched text) once."""
    parsed = parse(source)
    if parsed is None or not isinstance(line, int):
        return []
    wrapper, col = parsed
    a, b = span(col, line)
    module = wrapper.module
    out, seen, pairs = [], {source}, []
    for node, s, e in col.nodes:
        if not (a <= s and e <= b):
            continue
        found = []
        for ed in sites.EDITORS + calls.EDITORS:
            found += ed(node)
        found += sites.loss_ignores_pad(node, col.names)
        found += sites.sibling_name(node, col.pairs)
        for kind, label, new in found:
            pairs.append((node, new, kind))
            if kinds is not None and kind not in kinds:
                continue
            _add(out, seen, kind, label, lambda n=node, w=new: module.deep_replace(n, w).code, line)
    axes = [(n, w) for n, w, k in pairs if k == "reduction-axis"]
    if len(axes) > 1 and (kinds is None or "reduction-axis" in kinds):    # mean and var/std over one axis together
        _add(out, seen, "reduction-axis", "every reduction of the statement over dim=-1",
             lambda: _replace_all(module, axes), line)
    for kind, label, make in statements.edits(module, col, a, b) + inputs.edits(module, col, a, b) + \
            order.edits(module, col, a, b):
        if kinds is None or kind in kinds:
            _add(out, seen, kind, label, make, line)
    return out[:MAX_CANDIDATES]


class _ReplaceAll(cst.CSTTransformer):
    """Several disjoint nodes replaced in one pass (deep_replace rebuilds the tree: a second call would not
    find the other original node any more)."""

    def __init__(self, pairs):
        self.by_id = {id(n): w for n, w in pairs}

    def on_leave(self, original, updated):
        return self.by_id.get(id(original), updated)


def _replace_all(module, pairs):
    return module.visit(_ReplaceAll(pairs)).code


def _add(out, seen, kind, label, make, line):
    try:
        code = make()
        cst.parse_module(code)
    except Exception:          # noqa: BLE001 - an edit that does not give valid Python is no candidate
        return
    if code not in seen:
        seen.add(code)
        out.append(Candidate(kind, label, code, line))



def _assigned_names(stmt) -> set:
    if not (len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return set()
    return {t.value for tgt in stmt.body[0].targets for t in ([tgt.target] if not isinstance(tgt.target, cst.Tuple)
            else [el.value for el in tgt.target.elements]) if isinstance(t, cst.Name)}


def related(source: str, line: int) -> list[int]:
    """Lines next to the diagnosed one in the data's path, in the same function: the statement that last
    made a value the line reads (where a bad value came from), the first later one that reads a value the
    line makes (where it is used wrongly), and the condition the line runs under."""
    parsed = parse(source)
    if parsed is None or not isinstance(line, int):
        return []
    _, col = parsed
    a, b = span(col, line)
    fns = [(s, e) for n, s, e in col.nodes if isinstance(n, cst.FunctionDef) and s <= a <= e]
    if not fns:
        return []
    lo, hi = max(fns)[0], min(e for s, e in fns if s == max(fns)[0])
    names = [(n.value, s) for n, s, e in col.nodes if isinstance(n, cst.Name)]
    reads = {v for v, s in names if a <= s <= b}
    here = next((st for st, s, e in col.stmts if s == a and e == b), None)
    made = _assigned_names(here) if here is not None else set()
    before = [s for st, s, e in col.stmts if lo <= s and e < a and _assigned_names(st) & reads]
    after = [s for st, s, e in col.stmts if b < s <= hi and {v for v, x in names if s <= x <= e} & made]
    guard = [s for n, s, e in col.nodes if isinstance(n, cst.If) and s < a and b <= e and
             any(x <= a for _, x, _ in [(st, sx, ex) for st, sx, ex in col.nodes if st is n.body])]
    out = []
    for ln in ([max(before)] if before else []) + ([min(after)] if after else []) + ([max(guard)] if guard else []):
        if ln not in out and ln != a:
            out.append(ln)
    return out
