"""Find the student's line for a finding, from the source's syntax tree.

Probes know *what* went wrong and often the line of a torch call (from the
interceptor); these helpers walk from there to the line a student must edit:
the assignment that defined a wrong argument, the default of a parameter, the
return of a mask function.
"""
from __future__ import annotations

import ast
from functools import lru_cache


@lru_cache(maxsize=8)
def _tree(text: str) -> ast.Module:
    return ast.parse(text)


def functions(ctx, name: str) -> list[ast.FunctionDef]:
    """Every function or method called `name` (`Class.method` narrows to one class)."""
    cls, _, meth = name.rpartition(".")
    out = []
    for node in ast.walk(_tree(ctx.source.text)):
        if cls and isinstance(node, ast.ClassDef) and node.name == cls:
            out += [f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == meth]
        elif not cls and isinstance(node, ast.FunctionDef) and node.name == meth:
            out.append(node)
    return out


def enclosing_function(ctx, line: int) -> ast.FunctionDef | None:
    best = None
    for node in ast.walk(_tree(ctx.source.text)):
        if isinstance(node, ast.FunctionDef) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno > best.lineno:
                best = node
    return best


def call_at(ctx, line: int) -> ast.Call | None:
    """The outermost call that starts on `line`."""
    for node in ast.walk(_tree(ctx.source.text)):
        if isinstance(node, ast.Call) and node.lineno == line:
            return node
    return None


def root_name(expr: ast.AST) -> str | None:
    """`tgt_out.reshape(-1)` -> 'tgt_out'."""
    while True:
        if isinstance(expr, ast.Name):
            return expr.id
        if isinstance(expr, ast.Call):
            expr = expr.func
        elif isinstance(expr, (ast.Attribute, ast.Subscript)):
            expr = expr.value
        else:
            return None


def assignment_of(fn: ast.FunctionDef, var: str, before: int) -> int | None:
    """The last line in `fn` before `before` that assigns `var`."""
    best = None
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.lineno < before:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if var in names and (best is None or node.lineno > best):
                best = node.lineno
    return best


def last_return(fn: ast.FunctionDef) -> int | None:
    rets = [n.lineno for n in ast.walk(fn) if isinstance(n, ast.Return)]
    return max(rets) if rets else None


def calls_named(fn: ast.AST, *suffixes: str) -> list[ast.Call]:
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if any(name == s or name.endswith("." + s) for s in suffixes):
                out.append(node)
    return sorted(out, key=lambda n: n.lineno)


def lines_mentioning(fn: ast.AST, *words: str) -> list[int]:
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.With):   # `with torch.no_grad():` counts by its header only
            if any(w in ast.unparse(item) for item in node.items for w in words):
                out.add(node.lineno)
            continue
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.If, ast.For,
                                                                   ast.While, ast.With)):
            text = ast.unparse(node)
            if any(w in text for w in words):
                out.add(node.lineno)
    return sorted(out)


def innermost_loop(fn: ast.AST, line: int) -> ast.For | ast.While | None:
    """The innermost for/while loop of `fn` whose body holds `line`."""
    best = None
    for node in ast.walk(fn):
        if isinstance(node, (ast.For, ast.While)) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno >= best.lineno:
                best = node
    return best


def zeroing_line(fn: ast.FunctionDef, step_line: int) -> int | None:
    """Where gradients that pile up across optimizer steps are fixed, given the line of the step that met them:
    a zero_grad call of `fn` outside the loop that steps (it runs once, not every step), else the first
    backward() inside that loop (the zeroing goes before it); None when neither can be told."""
    loop = innermost_loop(fn, step_line)
    if loop is None:
        return None
    inside = range(loop.lineno, (loop.end_lineno or loop.lineno) + 1)
    zero = [c.lineno for c in calls_named(fn, "zero_grad")]
    if zero and not any(z in inside for z in zero):
        return zero[0]
    back = [c.lineno for c in calls_named(loop, "backward")]
    return back[0] if back and not zero else None


def attribute_assignment(ctx, attr: str) -> int | None:
    """The first statement outside an __init__ that assigns <anything>.<attr> (state set during a call)."""
    for node in ast.walk(_tree(ctx.source.text)):
        if isinstance(node, ast.FunctionDef) and node.name != "__init__":
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                    targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                    if any(isinstance(e, ast.Attribute) and e.attr == attr for t in targets for e in ast.walk(t)):
                        return sub.lineno
    return None


def accumulation_line(ctx, step_line: int | None) -> int | None:
    """The line to fix when gradients pile up across the steps of the student's train() (see zeroing_line);
    the step where they were measured when no better line can be told."""
    for fn in functions(ctx, "train"):
        if step_line and fn.lineno <= step_line <= (fn.end_lineno or fn.lineno):
            return zeroing_line(fn, step_line) or step_line
    return step_line


def unused_after(fn: ast.FunctionDef, line: int) -> int | None:
    """If a name assigned on `line` is never read later in `fn`, the next statement's line (where it was
    meant to be used)."""
    assigned, later_reads, next_stmt = set(), set(), None
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and node.lineno == line:
            assigned = {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.lineno > line:
            later_reads.add(node.id)
        if isinstance(node, ast.stmt) and node.lineno > line and (next_stmt is None or node.lineno < next_stmt):
            next_stmt = node.lineno
    unused = [n for n in assigned if n not in later_reads and not n.startswith("_")]
    return next_stmt if unused else None


def missing_residual_line(fn: ast.FunctionDef) -> int | None:
    """First `x = ...` in a layer's forward whose value does not add x back (norm(sublayer) without x +)."""
    args = [a.arg for a in fn.args.args[1:2]]
    var = args[0] if args else "x"
    for node in sorted((n for n in ast.walk(fn) if isinstance(n, ast.Assign)), key=lambda n: n.lineno):
        if not any(isinstance(t, ast.Name) and t.id == var for t in node.targets):
            continue
        if not isinstance(node.value, ast.Call):
            continue
        adds = [b for b in ast.walk(node.value) if isinstance(b, ast.BinOp) and isinstance(b.op, ast.Add)
                and any(isinstance(s, ast.Name) and s.id == var for s in (b.left, b.right))]
        if not adds:
            return node.lineno
    return None


def optimizer_lines(ctx) -> tuple[int | None, int | None]:
    """The scheduler call in train() if any, else the optimizer's; for a too-low lr, where its value comes from."""
    fns = functions(ctx, "train")
    if not fns:
        return None, None
    fn = fns[0]
    opt = [c for c in calls_named(fn, "Adam", "AdamW", "SGD", "RMSprop", "Adagrad") if c]
    sched = calls_named(fn, "LambdaLR", "LinearLR", "OneCycleLR", "StepLR", "CosineAnnealingLR",
                               "SequentialLR", "ExponentialLR", "MultiStepLR", "ReduceLROnPlateau")
    lr_line = None
    if opt:
        kw = next((k.value for k in opt[0].keywords if k.arg == "lr"), None)
        lr_line = opt[0].lineno
        if isinstance(kw, ast.Name):  # lr=lr: the value is the parameter's default
            names = [a.arg for a in fn.args.args]
            defaults = dict(zip(names[len(names) - len(fn.args.defaults):], fn.args.defaults))
            if kw.id in defaults:
                lr_line = defaults[kw.id].lineno
        elif kw is not None:
            lr_line = kw.lineno
    lam = [n for n in ast.walk(sched[0]) if isinstance(n, ast.Lambda)] if sched else []
    sched_line = lam[0].lineno if lam else sched[0].lineno if sched else (opt[0].lineno if opt else None)
    return lr_line, sched_line


def loss_target_lines(ctx, line, callers=()):
    """(line of the loss call's target argument, line that defined that target variable). A target that is a
    parameter of the function computing the loss (nanoGPT's forward(idx, targets)) is followed to the argument
    its caller passed (`callers`: the loss op's outer student lines, innermost first) and that one's definition."""
    call = call_at(ctx, line) if line else None
    if call is None:
        return line, None
    target = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "target"), None)
    if target is None:
        return line, None
    fn = enclosing_function(ctx, line)
    var = root_name(target)
    made = assignment_of(fn, var, line) if fn and var else None
    if made is None and fn is not None and var:
        made = argument_origin(ctx, fn, var, callers)
    return target.lineno, made


def argument_origin(ctx, fn, var, callers) -> int | None:
    """Where the value of `fn`'s parameter `var` was made: in the first caller line whose call passes it (by
    keyword, else by position, `self` left out), the statement that assigned the name passed, else that line."""
    params = [a.arg for a in fn.args.args]
    if var not in params:
        return None
    pos = params.index(var) - (1 if params and params[0] == "self" else 0)
    for caller in callers:
        call = call_at(ctx, caller)
        if call is None:
            continue
        given = next((k.value for k in call.keywords if k.arg == var), None)
        if given is None and 0 <= pos < len(call.args):
            given = call.args[pos]
        name = root_name(given) if given is not None else None
        if name is None:
            continue
        outer = enclosing_function(ctx, caller)
        return (assignment_of(outer, name, caller) if outer else None) or caller
    return None
