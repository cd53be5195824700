"""Statement-level edits at the diagnosed line: where a statement runs, not what it computes.

A mask built once before the decode loop is rebuilt at each step; work repeated in a loop moves before it;
`with torch.no_grad():` or `@torch.no_grad()` that cuts the gradient goes; a positional table made an
nn.Parameter becomes a buffer. Each edit is (kind, label, make) where make() gives the patched file's text.
"""
from __future__ import annotations

import libcst as cst

from .inputs import innermost, name_counts, per_function
from .sites import code as _code

# every kind of edit this family makes (edit.pending skips the family when none of them is asked for)
KINDS = frozenset({"per-step", "hoist", "reverse", "drop", "residual", "buffer", "no-grad", "unused-mask",
                   "unread-mask"})


def _block_of(col, stmt):
    """(owner, index) of the block holding `stmt` (an IndentedBlock or the Module)."""
    for node, _, _ in col.nodes:
        body = getattr(node, "body", None)
        if isinstance(node, (cst.IndentedBlock, cst.Module)) and isinstance(body, (list, tuple)):
            for i, st in enumerate(body):
                if st is stmt:
                    return node, i
    return None, None


def _loop_holding(col, block):
    for node, _, _ in col.nodes:
        if isinstance(node, (cst.For, cst.While)) and node.body is block:
            return node
    return None


def _with_body(block, i, body):
    return block.with_changes(body=list(block.body[:i]) + list(body) + list(block.body[i + 1:]))


def edits(module: cst.Module, col, a: int, b: int):
    out = []
    stmt = next((n for n, s, e in col.stmts if s == a and e == b), None)
    if stmt is not None:
        block, i = _block_of(col, stmt)
        if block is not None:
            nxt = next((s for s in block.body[i + 1:] if isinstance(s, (cst.For, cst.While))), None)
            if nxt is not None and isinstance(stmt.body[0], cst.Assign):
                inner = nxt.body.with_changes(body=[stmt] + list(nxt.body.body))
                out.append(("per-step", "built again at every step of the loop that follows",
                            lambda n=nxt, x=inner: module.deep_replace(n, n.with_changes(body=x)).code))
            loop = _loop_holding(col, block)
            if loop is not None and isinstance(stmt.body[0], cst.Assign):
                out.append(("hoist", "computed once, before the loop", lambda l=loop, blk=block, j=i: _hoist(
                    module, col, l, blk, j)))
        guard = next((n for n, _, _ in col.nodes if isinstance(n, cst.If) and n.body is block and n.orelse is None
                      and _caches(n.test)), None) if block is not None else None
        if guard is not None:     # `if self.m is None: self.m = ...`: made once, kept for every later input
            outer, k = _block_of(col, guard)
            if outer is not None:
                out.append(("per-step", "computed at every call instead of once and cached",
                            lambda o=outer, j=k, g=guard: module.deep_replace(o, _with_body(o, j, g.body.body)).code))
        out += unused(module, col, a, stmt)
        body = stmt.body[0]
        if isinstance(body, cst.Assign) and isinstance(body.targets[0].target, cst.Subscript) and \
                isinstance(body.value, cst.Name):      # tgt[i, 1:L + 1] = seq: the sequence written forwards
            rev = stmt.with_changes(body=[body.with_changes(value=cst.parse_expression(f"{body.value.value}.flip(0)"))])
            out.append(("reverse", f"{body.value.value}.flip(0): the sequence reversed",
                        lambda st=stmt, r=rev: module.deep_replace(st, r).code))
        if isinstance(body, cst.Expr) and isinstance(body.value, cst.Call) and block is not None and \
                len(block.body) > 1 and ".init." in _code(body.value.func):     # an init that undoes the default
            out.append(("drop", f"without {_code(body.value.func)}(...)",
                        lambda bl=block, j=i: module.deep_replace(bl, _with_body(bl, j, [])).code))
        res = _residual(body)
        if res is not None:
            out.append(("residual", f"the residual {_code(body.targets[0].target)} + added back",
                        lambda b0=body, r=res: module.deep_replace(b0, r).code))
        param = _parameter_to_buffer(stmt)
        if param is not None:
            out.append(("buffer", "registered as a buffer, not a trained Parameter",
                        lambda s=stmt, p=param: module.deep_replace(s, p).code))
    for node, s, e in col.nodes:
        if isinstance(node, cst.With) and s == a and _no_grad(node.items[0].item) and len(node.items) == 1:
            blk, j = _block_of(col, node)
            if blk is not None:
                out.append(("no-grad", "without the torch.no_grad() block around it",
                            lambda bl=blk, k=j, w=node: module.deep_replace(bl, _with_body(bl, k, w.body.body)).code))
        if isinstance(node, cst.FunctionDef):
            for dec in node.decorators:
                if _no_grad(dec.decorator) and any(d is dec and ds == a for d, ds, _ in col.nodes):
                    rest = [d for d in node.decorators if d is not dec]
                    out.append(("no-grad", "without the @torch.no_grad() decorator",
                                lambda f=node, r=rest: module.deep_replace(f, f.with_changes(decorators=r)).code))
    return out


def unused(module: cst.Module, col, line: int, stmt) -> list:
    """A mask made and never used: `return pad` -> `return pad & causal`; a local that is only ever assigned
    given to the line's call (`layer(x)` -> `layer(x, src_key_padding_mask=key_padding)`: unread-mask); a
    parameter no call is given passed on (`f(x)` -> `f(x, causal=causal)`)."""
    fn = innermost(col, line)
    if fn is None or stmt is None:
        return []
    counts = per_function(fn, name_counts)
    params = {p.name.value for p in fn.params.params + fn.params.kwonly_params}
    passed, targets = per_function(fn, _call_args), per_function(fn, _target_counts)   # targets: names assigned
    maskish = [n for n in counts if n != fn.name.value and ("mask" in n.lower() or "padding" in n.lower() or n in (
        "causal", "future", "tri", "src_mask", "tgt_mask")) and (n in params or n in targets)]
    # built and never read (every mention assigns it), or a parameter (however defaulted) that no call is given
    idle = [n for n in maskish if counts[n] == 1 or (n not in params and counts[n] == targets.get(n)) or
            (n in params and n not in passed)]
    out = []
    body = stmt.body[0]
    for n in idle:
        if isinstance(body, cst.Return) and body.value is not None and n not in params and counts[n] == 1:
            new = body.with_changes(value=cst.parse_expression(f"{_code(body.value)} & {n}"))
            out.append(("unused-mask", f"combined with {n}, which was built and never used",
                        lambda b=body, x=new: module.deep_replace(b, x).code))
        if n in params:
            out += _given(module, col, line, stmt, n, (n,), "a parameter nothing used")
        else:                       # a local mask built for the call on this line and not given to it
            out += _given(module, col, line, stmt, n, _keywords(n), kind="unread-mask")
    return out


# torch.nn's own names for a key-padding mask and for an attention mask (nn.TransformerEncoderLayer,
# nn.MultiheadAttention, nn.Transformer*, F.scaled_dot_product_attention): where a student's local mask goes
# when the call is to one of them rather than to a module of their own
PADDING_KEYWORDS = ("src_key_padding_mask", "key_padding_mask", "tgt_key_padding_mask", "memory_key_padding_mask")
MASK_KEYWORDS = ("mask", "src_mask", "attn_mask", "tgt_mask")


def _keywords(name: str) -> tuple[str, ...]:
    """The keywords a local mask may be given as: its own name first, then torch's for its kind."""
    own = (name,)
    return own + tuple(k for k in (PADDING_KEYWORDS if "pad" in name.lower() else MASK_KEYWORDS) if k != name)


def _given(module, col, line: int, stmt, n: str, keywords: tuple, why: str = "built and never used",
           kind: str = "unused-mask") -> list:
    """`n` passed to a call of the statement (the innermost first: the one it was meant for) as each keyword,
    and as the next positional argument. A local that is only ever assigned is `unread-mask`: the search tries
    it anywhere (a value computed and dropped); a parameter no call is given is a weaker sign, for the
    mask-missing causes alone."""
    out = []
    end = line + len(_code(stmt).splitlines())
    calls = sorted(((c, s, e) for c, s, e in col.nodes if isinstance(c, cst.Call)), key=lambda t: len(_code(t[0])))
    for call, s, e in calls:
        if not (s >= line and e <= end):
            continue
        if isinstance(call.func, cst.Attribute):
            for k in keywords:
                if any(a.keyword and a.keyword.value == k for a in call.args):
                    continue
                args = list(call.args)
                if args:
                    args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                args.append(cst.Arg(keyword=cst.Name(k), value=cst.Name(n), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))))
                out.append((kind, f"{k}={n} passed on ({why})",
                            lambda c=call, a=args: module.deep_replace(c, c.with_changes(args=a)).code))
        if call.args and all(a.keyword is None and not a.star for a in call.args) and _code(call.func) != "super":
            args = list(call.args)      # layer(x) -> layer(x, mask): the mask as the next argument
            args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(cst.Arg(value=cst.Name(n)))
            out.append((kind, f"{n} passed on as the next argument ({why})",
                        lambda c=call, a=args: module.deep_replace(c, c.with_changes(args=a)).code))
    return out


def _target_counts(fn) -> dict:
    """How many times each plain name is assigned in fn (`name = ...`, `name: T = ...`, `name += ...`)."""
    found: dict = {}

    class V(cst.CSTVisitor):
        def _add(self, t):
            for x in ([t] if not isinstance(t, cst.Tuple) else [e.value for e in t.elements]):
                if isinstance(x, cst.Name):
                    found[x.value] = found.get(x.value, 0) + 1

        def visit_AssignTarget(self, node):
            self._add(node.target)

        def visit_AnnAssign(self, node):
            self._add(node.target)
    fn.visit(V())
    return found


def _caches(test) -> bool:
    """`x is None`, `not hasattr(...)`, `x is None or ...`: a guard that makes something once."""
    text = _code(test).replace(" ", "")
    return text.endswith("isNone") or text.startswith("nothasattr(") or "isNoneor" in text


def _no_grad(expr) -> bool:
    text = _code(expr).replace(" ", "")
    return text in ("torch.no_grad()", "no_grad()", "torch.inference_mode()", "torch.no_grad")


def _hoist(module, col, loop, block, i):
    stmt = block.body[i]
    outer, k = _block_of(col, loop)
    if outer is None:
        raise ValueError("the loop is not in a block")
    inner = block.with_changes(body=list(block.body[:i]) + list(block.body[i + 1:]))
    if not inner.body:
        raise ValueError("the loop would be empty")
    new_loop = loop.with_changes(body=inner)
    new_outer = outer.with_changes(body=list(outer.body[:k]) + [stmt, new_loop] + list(outer.body[k + 1:]))
    return module.deep_replace(outer, new_outer).code


def _parameter_to_buffer(stmt):
    """self.pe = nn.Parameter(x[, requires_grad=...]) -> self.register_buffer('pe', x)."""
    if len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign) or len(stmt.body[0].targets) != 1:
        return None
    asg = stmt.body[0]
    t, v = asg.targets[0].target, asg.value
    if not (isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self"):
        return None
    if not (isinstance(v, cst.Call) and _code(v.func) in ("nn.Parameter", "torch.nn.Parameter", "Parameter")
            and v.args and v.args[0].keyword is None):
        return None
    call = cst.parse_expression(f"self.register_buffer({t.attr.value!r}, {_code(v.args[0].value)})")
    return stmt.with_changes(body=[cst.Expr(call)])


def _residual(body):
    """x = self.norm(sublayer(...)) -> x = self.norm(x + sublayer(...)): the residual connection dropped."""
    if not (isinstance(body, cst.Assign) and len(body.targets) == 1 and isinstance(body.targets[0].target, cst.Name)
            and isinstance(body.value, cst.Call) and len(body.value.args) == 1 and body.value.args[0].keyword is None):
        return None
    arg = body.value.args[0]
    if isinstance(arg.value, cst.BinaryOperation) or not isinstance(arg.value, cst.Call):
        return None
    x = body.targets[0].target.value
    new = cst.parse_expression(f"{x} + {_code(arg.value)}")
    return body.with_changes(value=body.value.with_changes(args=[arg.with_changes(value=new)]))


def _call_args(fn) -> set:
    """Names given to some call inside fn, as an argument's value."""
    found = set()

    class V(cst.CSTVisitor):
        def visit_Arg(self, node):
            if isinstance(node.value, cst.Name):
                found.add(node.value.value)
    fn.visit(V())
    return found
