"""Statement-level edits in the block that holds the diagnosed line: which statements run, and in what order.

Training loops and decoders go wrong by a statement in the wrong place more than by a wrong expression: a
zero_grad between backward() and step(), a scheduler stepped only when logging, a model left in eval mode by
a decode inside the loop. Each rule is a mechanism read from the code's own structure (the loop around the
line, the optimizer whose step() it calls, the scheduler built over it, the model put in training mode
before it), never from a file's name; the verifier decides whether an edit repairs. Each edit is
(kind, label, make) like statements.edits: make() gives the patched file's text.
"""
from __future__ import annotations

import re

import libcst as cst

from .sites import code as _code

# every kind of edit this family makes (edit.pending skips the family when none of them is asked for)
KINDS = frozenset({"zero-grad", "scheduler-step", "train-mode", "eval-mode", "order", "drop-statement",
                   "renormalise", "trained-only"})

_SCHEDULER = re.compile(r"lr_scheduler|Scheduler\b|\w+LR\b")
# methods of a tensor: a parameter called only through these is data, not a model
_TENSOR_METHODS = {"size", "view", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "to", "float", "long",
                   "masked_fill", "softmax", "sum", "mean", "contiguous", "dim", "ne", "eq", "new_zeros", "new_full",
                   "new_ones", "expand", "repeat", "clone", "detach", "item", "tolist", "numel", "argmax", "max",
                   "min", "flip", "type_as", "matmul", "bmm", "chunk", "split", "cpu", "cuda", "int", "bool", "any",
                   "all", "index_select", "gather", "scatter", "fill_", "zero_", "copy_", "masked_fill_", "tril",
                   "triu", "new_tensor", "t", "numpy", "flatten", "view_as", "expand_as", "repeat_interleave"}


def _method(stmt) -> tuple[str, str] | None:
    """`recv.name(...)` as a statement of its own -> (recv, name); also `x = recv.name(...)`."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    s = stmt.body[0]
    v = s.value if isinstance(s, (cst.Expr, cst.Assign)) else None
    if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute):
        return _code(v.func.value), v.func.attr.value
    return None


def _base(text: str) -> str:
    """`model.to(device)` -> `model`: the name a call chain starts from."""
    return re.match(r"[A-Za-z_]\w*", text).group(0) if re.match(r"[A-Za-z_]\w*", text) else text


def _innermost(col, a, types):
    found = [(n, s, e) for n, s, e in col.nodes if isinstance(n, types) and s <= a <= e]
    return min(found, key=lambda t: t[2] - t[1])[0] if found else None


def _statement_at(col, a, b):
    """The statement (simple, or compound with its header at `a`) at the diagnosed span."""
    simple = next((n for n, s, e in col.stmts if s == a and e == b), None)
    if simple is not None:
        return simple
    return next((n for n, s, e in col.nodes if s == a and isinstance(n, (cst.If, cst.For, cst.While, cst.With))),
                None)


def _walk(block):
    """Every statement under a block, with the block holding it: [(stmt, block, index)]."""
    out = []
    for i, st in enumerate(getattr(block, "body", [])):
        out.append((st, block, i))
        for child in (getattr(st, "body", None), getattr(getattr(st, "orelse", None), "body", None)):
            if isinstance(child, cst.IndentedBlock):
                out += _walk(child)
    return out


def _insert(module, block, i, stmts):
    return module.deep_replace(block, block.with_changes(body=list(block.body[:i]) + stmts + list(block.body[i:]))).code


def _move(module, block, i, j):
    """The statement at i of `block` moved to stand before the one now at j (same block)."""
    body = list(block.body)
    st = body.pop(i)
    body.insert(j if j < i else j - 1, st)
    return module.deep_replace(block, block.with_changes(body=body)).code


def _line(text: str):
    return cst.parse_statement(text + "\n")


def _schedulers(fn) -> list[str]:
    out = []
    for st, _, _ in _walk(fn.body):
        if isinstance(st, cst.SimpleStatementLine) and isinstance(st.body[0], cst.Assign) and \
                len(st.body[0].targets) == 1 and isinstance(st.body[0].targets[0].target, cst.Name) and \
                isinstance(st.body[0].value, cst.Call) and _SCHEDULER.search(_code(st.body[0].value.func)):
            out.append(st.body[0].targets[0].target.value)
    return out


def _into_loop(module, col, a, b) -> list:
    """`opt.zero_grad()` (or `model.train()`) run once, before the loop that steps `opt`: moved to the start of
    that loop's body, so it runs at every step."""
    from .statements import _block_of
    stmt = _statement_at(col, a, b)
    m = _method(stmt) if stmt is not None else None
    if m is None or m[1] not in ("zero_grad", "train"):
        return []
    block, i = _block_of(col, stmt)
    if block is None:
        return []
    for k in range(i + 1, len(block.body)):
        loop = block.body[k]
        if isinstance(loop, (cst.For, cst.While)) and isinstance(loop.body, cst.IndentedBlock) and any(
                (_method(st) or ("", ""))[1] == "step" for st, _, _ in _walk(loop.body)):
            new_loop = loop.with_changes(body=loop.body.with_changes(body=[stmt] + list(loop.body.body)))
            body = list(block.body[:i]) + list(block.body[i + 1:k]) + [new_loop] + list(block.body[k + 1:])
            return [("zero-grad" if m[1] == "zero_grad" else "train-mode",
                     f"{m[0]}.{m[1]}() at the start of every step, not once before the loop",
                     lambda body=body: module.deep_replace(block, block.with_changes(body=body)).code)]
    return []


def training_loop(module, col, a, b) -> list:
    """Edits of the loop around the line that calls backward() and an optimizer's step()."""
    fn = _innermost(col, a, cst.FunctionDef)
    loop = _innermost(col, a, (cst.For, cst.While))
    if fn is None or loop is None:
        return _into_loop(module, col, a, b)
    inner = _walk(loop.body)
    calls = [(m, st, blk, i) for st, blk, i in inner for m in [_method(st)] if m]
    scheds = _schedulers(fn)
    backward = next(((st, blk, i) for m, st, blk, i in calls if m[1] == "backward"), None)
    opt = next(((m[0], st, blk, i) for m, st, blk, i in calls if m[1] == "step" and m[0] not in scheds), None)
    out = []
    if backward is not None and opt is not None:
        zeroes = [(st, blk, i) for m, st, blk, i in calls if m[1] == "zero_grad"]
        _, bblk, bi = backward
        if not zeroes:
            out.append(("zero-grad", f"{opt[0]}.zero_grad() before the backward()",
                        lambda: _insert(module, bblk, bi, [_line(f"{opt[0]}.zero_grad()")])))
        _, _, oblk, oi = opt
        for st, blk, i in zeroes:      # a zero_grad between the backward and the step: moved before the backward
            if blk is bblk and bi < i and (oblk is not blk or i < oi):
                out.append(("zero-grad", "zero_grad() before the backward(), not after it",
                            lambda blk=blk, i=i: _move(module, blk, i, bi)))
        for s in scheds:
            at = [(st, blk, i) for m, st, blk, i in calls if m == (s, "step")]
            if not at:
                out.append(("scheduler-step", f"{s}.step() after {opt[0]}.step()",
                            lambda s=s: _insert(module, oblk, oi + 1, [_line(f"{s}.step()")])))
            for st, blk, i in at:       # stepped under a condition: at every step, after the optimizer's
                if blk is not oblk and len(blk.body) > 1:
                    out.append(("scheduler-step", f"{s}.step() at every step, after {opt[0]}.step()",
                                lambda blk=blk, i=i: _step_moved(module, blk, i, oblk, oi)))
    out += _train_mode(module, col, fn, loop, inner, calls)
    return out


def _step_moved(module, blk, i, oblk, oi):
    st = blk.body[i]

    class T(cst.CSTTransformer):
        def on_leave(self, original, updated):
            if original is blk:
                return updated.with_changes(body=list(updated.body[:i]) + list(updated.body[i + 1:]))
            if original is oblk:
                body = list(updated.body)
                return updated.with_changes(body=body[:oi + 1] + [st] + body[oi + 1:])
            return updated
    return module.visit(T()).code


def _train_mode(module, col, fn, loop, inner, calls) -> list:
    """A model put in training mode before the loop and taken out of it inside (a function of the file that
    calls eval(), called in the loop): train() again at the start of every step."""
    if any(m[1] in ("train", "eval") for m, *_ in calls) or not isinstance(loop.body, cst.IndentedBlock):
        return []
    evals = {n.name.value for n in col.functions if ".eval()" in _code(n.body)}      # of the whole file
    body = _code(loop.body)
    if not any(re.search(rf"\b{re.escape(f)}\(", body) for f in evals):
        return []
    before = []
    for st, _, _ in _walk(fn.body):
        if st is loop:
            break
        m = _method(st)
        if m and m[1] == "train":
            before.append(_base(m[0]))
    if not before:
        return []
    model = before[-1]
    return [("train-mode", f"{model}.train() at the start of every step",
             lambda: _insert(module, loop.body, 0, [_line(f"{model}.train()")]))]


def eval_mode(module, col, a, b) -> list:
    """A function that runs a model its caller passes (p.encode(...), p(...)) and trains nothing, without
    p.eval(): eval() as its first statement (dropout off while decoding)."""
    fn = _innermost(col, a, cst.FunctionDef)
    if fn is None or not isinstance(fn.body, cst.IndentedBlock):
        return []
    text = _code(fn.body)
    if ".eval()" in text or ".train(" in text or ".backward(" in text:
        return []
    params = [p.name.value for p in fn.params.params]
    if params[:1] == ["self"]:
        return []
    for n in params:
        if any(m not in _TENSOR_METHODS for m in re.findall(rf"\b{n}\.(\w+)\(", text)):
            body = fn.body.body
            k = 1 if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
                and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)) else 0
            return [("eval-mode", f"{n}.eval() before it runs the model",
                     lambda: _insert(module, fn.body, k, [_line(f"{n}.eval()")]))]
    return []


def moves(module, col, a, b) -> list:
    """The statement at the line one step earlier or later in its block, out of the condition it sits
    under, without it when it only adds noise to a value or repeats the statement before it; probabilities
    zeroed after their softmax renormalised."""
    from .statements import _block_of
    stmt = _statement_at(col, a, b)
    if stmt is None:
        return []
    block, i = _block_of(col, stmt)
    if block is None:
        return []
    out = _renormalise(module, col, stmt, block, i) + _trained_only(module, col, a, stmt, block, i)
    body = list(block.body)
    movable = (cst.SimpleStatementLine, cst.If, cst.For, cst.While, cst.With)

    def ok(st):
        return isinstance(st, movable) and not (isinstance(st, cst.SimpleStatementLine) and
                                                isinstance(st.body[0], (cst.Return, cst.Raise)))
    if ok(stmt) and i + 1 < len(body) and ok(body[i + 1]):
        out.append(("order", "one statement later", lambda: _move(module, block, i + 1, i)))
    if ok(stmt) and i > 0 and ok(body[i - 1]) and not _is_docstring(body[i - 1]):
        out.append(("order", "one statement earlier", lambda: _move(module, block, i, i - 1)))
    cond = next((n for n, _, _ in col.nodes if isinstance(n, cst.If) and n.body is block and n.orelse is None), None)
    if cond is not None and len(body) > 1 and _innermost(col, a, (cst.For, cst.While)) is not None:
        outer, k = _block_of(col, cond)
        if outer is not None:
            out.append(("order", f"at every step, not only if {_code(cond.test)}",
                        lambda: _out_of(module, outer, k, cond, stmt)))
    if isinstance(stmt, cst.SimpleStatementLine) and len(body) > 1 and (
            (_updates_itself(stmt) and "rand" in _code(stmt)) or
            (i > 0 and _code(body[i - 1]).strip() == _code(stmt).strip())):
        out.append(("drop-statement", "without this statement", lambda: module.deep_replace(
            block, block.with_changes(body=body[:i] + body[i + 1:])).code))
    return out


def _out_of(module, outer, k, cond, stmt):
    inner = cond.body.with_changes(body=[x for x in cond.body.body if x is not stmt])
    new = list(outer.body[:k]) + [stmt, cond.with_changes(body=inner)] + list(outer.body[k + 1:])
    return module.deep_replace(outer, outer.with_changes(body=new)).code


def _is_docstring(st) -> bool:
    return isinstance(st, cst.SimpleStatementLine) and isinstance(st.body[0], cst.Expr) and \
        isinstance(st.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def _target(stmt) -> str | None:
    s = stmt.body[0]
    if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name):
        return s.targets[0].target.value
    if isinstance(s, cst.AugAssign) and isinstance(s.target, cst.Name):
        return s.target.value
    return None


def _updates_itself(stmt) -> bool:
    """`x = x + ...` / `x += ...`: a value changed in place, which the code runs the same without. Dropped only
    when what it adds is random (noise in a forward pass): dropping any other update (a positional encoding,
    a residual) can pass the quick suite's checks and still be no repair."""
    n = _target(stmt)
    s = stmt.body[0]
    if n is None:
        return False
    if isinstance(s, cst.AugAssign):
        return True
    v = s.value
    return isinstance(v, cst.BinaryOperation) and re.match(rf"{n}\b", _code(v.left)) is not None and \
        _code(v.left) == n


def _renormalise(module, col, stmt, block, i) -> list:
    """`p = p.masked_fill(m, 0)` / `p = p * keep` after `p = softmax(...)`: the rows no longer sum to one;
    divided by their sum again (the same weights as masking the scores before the softmax)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return []
    n = _target(stmt)
    if n is None or not isinstance(stmt.body[0], cst.Assign):
        return []
    v = _code(stmt.body[0].value)
    zeroes = re.match(rf"{n}\.masked_fill\(.*,\s*0(\.0*)?\)$", v, re.S) or re.match(rf"{n} \* \w", v)
    fn = _innermost(col, next(s for x, s, _ in col.nodes if x is stmt), cst.FunctionDef)
    if not zeroes or fn is None or not re.search(rf"\b{n} = .*softmax\(", _code(fn)):
        return []
    new = _line(f"{n} = {n} / {n}.sum(dim=-1, keepdim=True).clamp_min(1e-9)")   # a row masked whole stays 0
    return [("renormalise", "renormalised after the mask (the rows sum to one again)",
             lambda: _insert(module, block, i + 1, [new]))]


def _trained_only(module, col, a, stmt, block, i) -> list:
    """nn.init.f_(p) in a loop over a model's parameters: also overwrites the ones kept frozen
    (requires_grad=False, a fixed table); initialised only when p.requires_grad."""
    if not isinstance(stmt, cst.SimpleStatementLine) or not isinstance(stmt.body[0], cst.Expr):
        return []
    call = stmt.body[0].value
    loop = _innermost(col, a, cst.For)
    if not (isinstance(call, cst.Call) and ".init." in _code(call.func) and call.args and
            isinstance(call.args[0].value, cst.Name) and loop is not None and "parameters(" in _code(loop.iter)):
        return []
    p = call.args[0].value.value
    guarded = cst.If(test=cst.parse_expression(f"{p}.requires_grad"), body=cst.IndentedBlock([stmt]))
    return [("trained-only", f"only when {p}.requires_grad (frozen parameters kept)", lambda: module.deep_replace(
        block, block.with_changes(body=list(block.body[:i]) + [guarded] + list(block.body[i + 1:]))).code)]


def edits(module, col, a, b) -> list:
    return training_loop(module, col, a, b) + eval_mode(module, col, a, b) + moves(module, col, a, b)
