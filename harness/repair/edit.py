"""Candidate repairs of one line of the student's file: the file's text with one small edit made there.

The file is parsed with LibCST and only the edited node is replaced (deep_replace; the text of the top-level
function or class around it is rebuilt, Spliced), so every other character of the file - formatting, comments,
blank lines - is the student's own. Runs in the parent on the text alone: nothing is imported or executed.
"""
from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from . import calls, inputs, order, sites, statements

FAMILIES = (statements, inputs, order)      # the statement-level editors, in the order their edits are listed

MAX_CANDIDATES = 24


@dataclass(frozen=True)
class Candidate:
    kind: str       # the family of edit (softmax-axis, triangle, polarity, ...): catalogue.py orders by it
    label: str      # what the edit does, in words
    code: str       # the whole patched file
    line: int       # the line of the statement it edits


class _Names:
    """What the editors need from the whole file: every name (each identifier LibCST makes a Name of), the
    names assigned together (a, b = ...: tgt_in <-> tgt_out) and every function (order.py: which ones call
    .eval()). Names and pairs are read off Python's own tree (a LibCST visit of the whole file took ~15 ms of
    a repair's start; the same sets on every file of the corpus, mutants, references and the harness: 521);
    the functions are LibCST's nodes, found when first asked for."""

    def __init__(self, module, source: str):
        self.names, self.pairs, self._module, self._functions = set(), {}, module, None
        for n in ast.walk(ast.parse(source)):
            if isinstance(n, ast.Name):
                self.names.add(n.id)
            elif isinstance(n, ast.Attribute):
                self.names.add(n.attr)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.names.add(n.name)
            elif isinstance(n, ast.arg):
                self.names.add(n.arg)
            elif isinstance(n, ast.keyword) and n.arg:
                self.names.add(n.arg)
            elif isinstance(n, ast.alias):
                self.names.update(n.name.split(".") + ([n.asname] if n.asname else []))
            elif isinstance(n, ast.ImportFrom) and n.module:
                self.names.update(n.module.split("."))
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                self.names.update(n.names)
            elif isinstance(n, ast.ExceptHandler) and n.name:
                self.names.add(n.name)
            elif isinstance(n, ast.Constant) and (n.value is None or isinstance(n.value, bool)):
                self.names.add(repr(n.value))          # LibCST's Name("True"), Name("None")
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Tuple):
                named = [e.value if isinstance(e, ast.Starred) else e for e in n.targets[0].elts]
                together = [e.id for e in named if isinstance(e, ast.Name)]
                for x in together:
                    self.pairs.setdefault(x, set()).update(y for y in together if y != x)

    @property
    def functions(self) -> list:
        if self._functions is None:
            found: list = []

            class Defs(cst.CSTVisitor):
                def visit_FunctionDef(self, node) -> bool:
                    found.append(node)
                    return True
            self._module.visit(Defs())
            self._functions = found
        return self._functions


class _Collect(cst.CSTVisitor):
    """Every node with its position (lines of the whole file), and each simple statement's lines."""
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, whole: _Names, offset: int = 0):
        self.nodes, self.stmts, self.offset, self.whole = [], [], offset, whole
        self.names, self.pairs = whole.names, whole.pairs

    @property
    def functions(self) -> list:
        return self.whole.functions

    def on_visit(self, node) -> bool:
        pos = self.get_metadata(PositionProvider, node, None)
        if pos is not None and not isinstance(node, cst.Module):
            a, b = pos.start.line + self.offset, pos.end.line + self.offset
            self.nodes.append((node, a, b))
            if isinstance(node, cst.SimpleStatementLine):
                self.stmts.append((node, a, b))
        return True


@functools.lru_cache(maxsize=4)
def _whole(source: str):
    """(the module, what _Names found in it, where each top-level statement's text is, its positions by part),
    or None when LibCST cannot parse the text. The places are character spans of the text, [start, end) per
    statement of module.body, or None when the statements' own texts do not lie end to end in it (then nothing
    is spliced). The positions (_part) live with the module they index: once this entry is dropped and the
    text parsed again, none of the old tree's nodes can be paired with the new tree (an edit of a node the new
    tree does not hold changes nothing, and a long-lived process - the check daemon - then found no edit)."""
    try:
        module = cst.parse_module(source)
        names = _Names(module, source)
        texts = [module.code_for_node(stmt) for stmt in module.body]    # the statement's own lines, comments too
    except Exception:          # noqa: BLE001 - any text LibCST refuses is simply not repaired
        return None
    at = source.find(texts[0]) if texts else 0
    places: list | None = []
    for t in texts:
        if at < 0 or source[at:at + len(t)] != t:
            places = None
            break
        places.append((at, at + len(t)))
        at += len(t)
    return module, names, places, {}


def warm(source: str) -> None:
    """Parse the text now (cached): what every later call on it pays first."""
    _whole(source)


class Spliced:
    """The module as the editors use it: `deep_replace(old, new).code` rebuilds only the top-level function or
    class that holds `old` and puts its text in place of that statement's own (every other character is the
    file's as it was, as a rebuild of the whole file gives it); anything else is the module's own."""

    def __init__(self, module, source: str, part=None, place=None, inside=frozenset()):
        self.module, self.source, self.part, self.place, self.inside = module, source, part, place, inside

    def deep_replace(self, old, new):
        if self.part is None or id(old) not in self.inside:
            return self.module.deep_replace(old, new)
        a, b = self.place
        return _Text(self.source[:a] + self.module.code_for_node(self.part.deep_replace(old, new)) + self.source[b:])

    def __getattr__(self, name):
        return getattr(self.module, name)


@dataclass(frozen=True)
class _Text:
    code: str


@functools.lru_cache(maxsize=16)
def parse(source: str, line: int | None = None):
    """(module, collected) or None when LibCST cannot parse the text (a notebook, a syntax error).

    With `line`, only the top-level function or class holding it is collected with positions (positions cost
    a code generation of what they cover: ~0.2 s for a whole lesson file, ~0.01 s for one class), once per
    function (_part); its nodes are the module's own, and an edit rebuilds that function's text alone
    (Spliced). Cached: the repairs of one file ask once per line, and nothing here changes a tree (edits make
    new ones)."""
    whole = _whole(source)
    if whole is None:
        return None
    module, names, places, _ = whole
    offset, index = len(module.header), None
    for i, stmt in enumerate(module.body if line is not None else ()):
        n = (source[places[i][0]:places[i][1]] if places else module.code_for_node(stmt)).count("\n")
        if offset < line <= offset + n:
            index = i if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) else None
            break
        offset += n
    col = _part(whole, index, offset if index is not None else 0)
    if col is None:
        return None
    if index is None or places is None:
        return Spliced(module, source), col
    inside = frozenset(id(n) for n, _, _ in col.nodes)       # the function's own node is among them
    return Spliced(module, source, module.body[index], places[index], inside), col


def _part(whole: tuple, index: int | None, offset: int):
    """The positions of the top-level statement `index` (None: of the whole file), lines counted from `offset`;
    kept with the parse they index (`whole`, what _whole gave)."""
    module, names, _, parts = whole
    if (index, offset) not in parts:
        parts[(index, offset)] = _positions(module, names, index, offset)
    return parts[(index, offset)]


def _positions(module, names, index: int | None, offset: int):
    try:
        if index is None:      # a line at the top level (or none given): the whole file
            wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        else:
            wrapper = MetadataWrapper(module.with_changes(body=[module.body[index]], header=[], footer=[]),
                                      unsafe_skip_copy=True)
        col = _Collect(names, offset)
        wrapper.visit(col)
    except Exception:          # noqa: BLE001
        return None
    return col


def span(col: _Collect, line: int) -> tuple[int, int]:
    """The lines of the smallest simple statement that holds `line` (a call over several lines is one edit
    site); the line alone when it is a compound statement's header."""
    best = None
    for node, a, b in col.stmts:
        if a <= line <= b and (best is None or b - a < best[1] - best[0]):
            best = (a, b)
    return best or (line, line)


@dataclass(frozen=True)
class Pending:
    """An edit known for a line, its text not yet made (making it rebuilds the function it is in: Spliced)."""
    kind: str
    label: str
    make: Callable[[], str]
    line: int


def candidates(source: str, line: int, kinds: tuple | None = None) -> list[Candidate]:
    """Every small edit the editors know for the statement at `line` (only `kinds` when given), each
    producing a file that still parses; duplicates (the same patched text) once."""
    return list(made(pending(source, line, kinds), {source}))


def made(pend: Iterable[Pending], seen: set, limit: int = MAX_CANDIDATES) -> Iterator[Candidate]:
    """The edits' texts, made one at a time as they are asked for: those that parse, each text once (`seen`
    holds the texts already given, the original's included, and grows)."""
    n = 0
    for p in pend:
        if n >= limit:
            return
        try:
            code = p.make()
            ast.parse(code)
        except Exception:          # noqa: BLE001 - an edit that does not give valid Python is no candidate
            continue
        if code not in seen:
            seen.add(code)
            n += 1
            yield Candidate(p.kind, p.label, code, p.line)


def _at(source: str, line):
    """(module, collected, first line, last line of the statement at `line`), or None (no line, no parse)."""
    parsed = parse(source, line) if isinstance(line, int) else None
    if parsed is None:
        return None
    module, col = parsed
    return (module, col) + span(col, line)


def pending(source: str, line: int, kinds: tuple | None = None) -> list[Pending]:
    """The edits known for the statement at `line` (only `kinds` when given), in the editors' order."""
    at = _at(source, line)
    if at is None:
        return []
    module, col, a, b = at
    out: list[Pending] = []
    pairs = []
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
            out.append(Pending(kind, label, lambda n=node, w=new: module.deep_replace(n, w).code, line))
    axes = [(n, w) for n, w, k in pairs if k == "reduction-axis"]
    if len(axes) > 1 and (kinds is None or "reduction-axis" in kinds):    # mean and var/std over one axis together
        out.append(Pending("reduction-axis", "every reduction of the statement over dim=-1",
                           lambda: _replace_all(module, axes), line))
    for family in FAMILIES:     # a family none of whose kinds is asked for is not worked out (~1-25 ms each)
        if kinds is None or family.KINDS & set(kinds):
            out += [Pending(kind, label, make, line) for kind, label, make in family.edits(module, col, a, b)
                    if kinds is None or kind in kinds]
    return out


class _ReplaceAll(cst.CSTTransformer):
    """Several disjoint nodes replaced in one pass (deep_replace rebuilds the tree: a second call would not
    find the other original node any more)."""

    def __init__(self, pairs):
        self.by_id = {id(n): w for n, w in pairs}

    def on_leave(self, original, updated):
        return self.by_id.get(id(original), updated)


def _replace_all(module, pairs):
    return module.visit(_ReplaceAll(pairs)).code



def _assigned_names(stmt) -> set:
    if not (len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return set()
    return {t.value for tgt in stmt.body[0].targets for t in ([tgt.target] if not isinstance(tgt.target, cst.Tuple)
            else [el.value for el in tgt.target.elements]) if isinstance(t, cst.Name)}


def constructed(source: str, line: int) -> list[int]:
    """Where each module the statement at `line` calls as `self.name(...)` is built in its class
    (`self.name = nn.Softmax(dim=1)`): an argument fixed at construction is edited there, not at the call."""
    at = _at(source, line)
    if at is None:
        return []
    _, col, a, b = at
    called = {n.func.attr.value for n, s, e in col.nodes if a <= s and e <= b and isinstance(n, cst.Call)
              and isinstance(n.func, cst.Attribute) and isinstance(n.func.value, cst.Name)
              and n.func.value.value == "self"}
    out = []
    for st, s, e in col.stmts:
        if len(st.body) == 1 and isinstance(st.body[0], cst.Assign) and s not in out and not a <= s <= b:
            t = st.body[0].targets[0].target
            if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self" \
                    and t.attr.value in called and isinstance(st.body[0].value, cst.Call):
                out.append(s)
    return out


def related(source: str, line: int) -> list[int]:
    """Lines next to the diagnosed one in the data's path, in the same function: the statement that last
    made a value the line reads (where a bad value came from), the first later one that reads a value the
    line makes (where it is used wrongly), and the condition the line runs under."""
    at = _at(source, line)
    if at is None:
        return []
    _, col, a, b = at
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
