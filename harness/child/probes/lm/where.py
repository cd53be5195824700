"""Where an `lm` interface problem is in the student's code (the component's check `location`).

The line that raised is rarely the line to change: a state dict that does not fit raises inside
load_state_dict, a constructor given the wrong arguments raises deep in the class. So:
- a key mismatch ("Missing key(s) ... "w_o.weight"", "Unexpected key(s) ... "output_proj.weight""): both
  sides, the adapter's line that writes the key it passes and the package's line that defines the attribute
  (`self.w_o = ...`, register_parameter/register_buffer); the adapter's is the location unless the adapter
  passes the course's own key names and the module names them otherwise. Only a missing key (an extra
  parameter such as a bias): the attribute's line.
- a KeyError of the student's own lookup (weights["output_proj.weight"]): the line that raised.
- any other interface problem (a size mismatch, a wrong argument, a dtype the contract does not have):
  the adapter's own line that handed the values over (the outermost frame of the student's files); when
  the failing method belongs to an object the adapter built a line earlier, the line that built it (where
  the constructor's arguments were given).
"""
from __future__ import annotations

import re


def _frames(tb, files: dict) -> list[tuple]:
    """[(frame, line)] of the student's files, outermost first."""
    out = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in files:
            out.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return out


def _built_at(frames: list, files: dict) -> dict | None:
    """The object whose method raised (its `self`) is a local of the adapter: the adapter's line that built it,
    with the arguments it was given (`rope = RoPE(d_k, theta, ...)`, then `rope(x, pos)` raises)."""
    (outer, line), (inner, _) = frames[0], frames[-1]
    obj = inner.f_locals.get("self")
    names = [k for k, v in outer.f_locals.items() if obj is not None and v is obj]
    if not names or outer is inner:
        return None
    path = outer.f_code.co_filename
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read().splitlines()
    except OSError:
        return None
    pat = re.compile(rf"^\s*{re.escape(names[0])}\s*(?::[^=]+)?=(?!=)")
    for i in range(min(line, len(text)), outer.f_code.co_firstlineno - 1, -1):    # the last assignment before
        if pat.search(text[i - 1]):
            return {"file": files[path], "line": i}
    return None


def _missing_attributes(message: str) -> list[str]:
    """'Missing key(s) in state_dict: "a.b.weight", "bias".' -> ['b', 'bias'] (the attribute each key names)."""
    m = re.search(r"Missing key\(s\) in state_dict:(.*?)(?:Unexpected key|size mismatch|\n|$)", message, re.S)
    keys = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    # "w1.bias" missing: the module has a bias parameter the contract does not (defined as self.bias)
    extra = ["bias"] if keys and all(k.split(".")[-1] == "bias" for k in keys) else []
    return extra + [a for a in _attrs(keys) if a not in extra]


def _definition(attr: str, files: dict) -> dict | None:
    """The first line of the student's files that defines `attr` on self; package files before adapters."""
    pat = re.compile(rf"^\s*self\.{re.escape(attr)}\s*(?::[^=]+)?=(?!=)|"
                     rf"register_(?:parameter|buffer)\(\s*['\"]{re.escape(attr)}['\"]")
    order = sorted(files.items(), key=lambda kv: kv[1].replace("\\", "/").endswith("tests/adapters.py"))
    for path, shown in order:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                for i, line in enumerate(f, 1):
                    if pat.search(line):
                        return {"file": shown, "line": i}
        except OSError:
            continue
    return None


# The attribute names of the course's state dicts (the adapters' documented keys): when the adapter passes
# one of these and the module names it otherwise, the module is the side to change; in every other key
# mismatch the adapter is (that is where students fix it: the key they typed).
CONTRACT_ATTRS = {"weight", "q_proj", "k_proj", "v_proj", "output_proj", "w1", "w2", "w3", "ln1", "ln2", "attn",
                  "ffn", "token_embeddings", "layers", "ln_final", "lm_head"}


def _unexpected_attributes(message: str) -> list[str]:
    m = re.search(r"Unexpected key\(s\) in state_dict:(.*?)(?:Missing key|size mismatch|\n|$)", message, re.S)
    return _attrs(re.findall(r'"([^"]+)"', m.group(1)) if m else [])


def _attrs(keys) -> list[str]:
    out = []
    for k in keys:
        parts = k.split(".")
        attr = parts[-2] if len(parts) > 1 and parts[-1] in ("weight", "bias") else parts[-1]
        if attr not in out and not attr.isdigit():
            out.append(attr)
    return out


def _adapter_key_line(frames: list, files: dict, attrs: list[str]) -> dict | None:
    """The adapter's line that writes one of these keys (a string literal naming the attribute), searched in
    the outermost student function that raised: the key the student typed."""
    if not frames or not attrs:
        return None
    outer, line = frames[0]
    path = outer.f_code.co_filename
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read().splitlines()
    except OSError:
        return None
    pat = re.compile("|".join(rf"""['"][^'"\n]*\b{re.escape(a)}\b[^'"\n]*['"]""" for a in attrs))
    end = line     # the call's statement may go on over several lines (a dict literal): up to the next def
    while end < len(text) and end < line + 40 and not re.match(r"(def|class|@)\b|\S", text[end][:1] or " "):
        end += 1
    hits = [i for i in range(outer.f_code.co_firstlineno, end + 1) if pat.search(text[i - 1])]
    return {"file": files[path], "line": min(hits, key=lambda i: (abs(i - line), -i))} if hits else None


def interface_sides(exc: BaseException, files: dict) -> dict:
    """A state-dict mismatch's two sides: {"adapter": the line writing the key, "module": the attribute}."""
    frames = _frames(exc.__traceback__, files)
    module = next((f for f in (_definition(a, files) for a in _missing_attributes(str(exc))) if f), None)
    adapter = _adapter_key_line(frames, files, _unexpected_attributes(str(exc)))
    return {k: v for k, v in (("adapter", adapter), ("module", module)) if v}


def interface_location(exc: BaseException, files: dict) -> dict | None:
    """The line to change for an interface exception, or None (then the raising line stands)."""
    frames = _frames(exc.__traceback__, files)
    sides = interface_sides(exc, files)
    if sides.get("adapter") and sides.get("module"):
        passed, named = _unexpected_attributes(str(exc)), _missing_attributes(str(exc))
        module_deviates = set(passed) <= CONTRACT_ATTRS and not set(named) <= CONTRACT_ATTRS
        return sides["module"] if module_deviates else sides["adapter"]
    if sides.get("module"):
        return sides["module"]
    if sides.get("adapter"):
        return sides["adapter"]
    if isinstance(exc, KeyError):     # the student's own lookup of a key the adapter does not pass: that line
        return None
    if not frames:
        return None
    outer, line = frames[0]
    return _built_at(frames, files) or {"file": files[outer.f_code.co_filename], "line": line}


def module_called(exc: BaseException, files: dict) -> dict | None:
    """`Embedding(...)` where Embedding is the submodule cs336_basics.NN.Embedding, not the class in it
    ("'module' object is not callable"): the package's __init__.py does not import the class, so
    `from package import Embedding` bound the submodule. The line to change is in that __init__.py (its last
    import, where the class belongs), not the call that raised."""
    import types
    if not isinstance(exc, TypeError) or "'module' object is not callable" not in str(exc):
        return None
    frames = _frames(exc.__traceback__, files)
    if not frames:
        return None
    frame, line = frames[-1]
    try:
        with open(frame.f_code.co_filename, encoding="utf-8", errors="replace") as f:
            text = f.read().splitlines()[line - 1]
    except (OSError, IndexError):
        return None
    scope = {**frame.f_globals, **frame.f_locals}
    for name, value in scope.items():
        if isinstance(value, types.ModuleType) and re.search(rf"\b{re.escape(name)}\s*\(", text):
            package = (value.__name__ or "").rpartition(".")[0]
            init = getattr(__import__("sys").modules.get(package), "__file__", None)
            if not package or init not in files:
                return None
            with open(init, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
            imports = [i for i, t in enumerate(lines, 1) if re.match(r"\s*(from|import)\s", t)]
            return {"file": files[init], "line": imports[-1] if imports else 1, "name": name,
                    "module": value.__name__, "package": package,
                    "called_at": {"file": files[frame.f_code.co_filename], "line": line}}
    return None


# Errors about a value's shape or dtype (not its contents: an index out of bounds is about the values).
SHAPE_TEXT = ("size of tensor", "must match", "shape", "mat1 and mat2", "dimension out of range", "broadcast",
              "dtype", "expected scalar type", "expected all tensors")
SHAPING = {"unsqueeze", "view", "reshape", "transpose", "permute", "expand", "__getitem__", "squeeze", "flatten",
           "repeat", "arange", "expand_as", "view_as", "t", "T", "mT", "long", "int", "float",
           "half", "stack", "cat", "tensor", "einsum", "rearrange"}


def crash_origin(failed, ops) -> dict | None:
    """Where the value that made an op raise was made: (op, its inputs' producers, shapes, stack) of the op
    that raised, from lm_divergence.record's recorder (`failed`). The course's inputs are right by construction,
    so when the raising op mixes an input with a value the student's code made, that value is the suspect; among
    several made ones, one shaped or cast by a reshaping op. None when it was made on the raising line itself."""
    if not failed or not failed[3]:
        return None
    name, ins, shapes, stack = failed
    raised_at = (stack[0][0], stack[0][1])
    made = [(ops[p], shape) for p, shape in zip(ins, shapes) if p is not None]
    if not made:
        return None
    if len(made) < len(ins):      # an input of the course's meets one value the student made: that value
        pick = made[-1] if len(made) == 1 else next((m for m in made if m[0].name in SHAPING), None)
    else:
        shaped = [m for m in made if m[0].name in SHAPING]
        pick = shaped[-1] if len(shaped) == 1 else None
    if pick is None:
        return None
    op, shape = pick
    for _ in range(4):      # back through same-shape steps (cos of the angles) to the op that shaped them
        if op.name in SHAPING:
            break
        back = [ops[p] for p in op.made_by if p is not None]
        if len(back) != 1 or not back[0].outs or not op.outs or back[0].outs[0].shape != op.outs[0].shape:
            break
        op = back[0]
    if op.name not in SHAPING:      # made by arithmetic or a copy (.to, .clone): no shaping step to name
        return None
    at = (op.stack[0][0], op.stack[0][1])
    if at == raised_at:
        return None
    return {"file": at[0], "line": at[1], "op": op.name, "shape": list(shape),
            "raised_at": {"file": raised_at[0], "line": raised_at[1], "op": name}}


# The course's hyperparameters under the names students give them (theta / rope_theta, context_length /
# max_seq_len): a value is in the wrong slot when its meaning differs from the slot's and the callee has a
# parameter with its meaning.
SYNONYMS = {"rope_theta": "theta", "base": "theta", "context_length": "seq_len", "max_seq_len": "seq_len",
            "max_seq_length": "seq_len", "seq_len": "seq_len", "n_heads": "num_heads", "n_layers": "num_layers",
            "d_head": "d_k", "head_dim": "d_k", "dim_ff": "d_ff", "ffn_dim": "d_ff"}


def _meaning(name: str) -> str:
    return SYNONYMS.get(name, name)


def argument_order(fn, files: dict) -> list[dict]:
    """Calls in the adapter `fn` that pass a variable positionally into another parameter's slot while the
    callee has a parameter of that variable's own name (`TransformerLM(vocab_size, d_model, context_length)`
    for (vocab_size, context_length, d_model)): [{file, line, callee, argument, slot}]. Read from the
    adapter's source and the callee's signature; the caller decides whether the failure it explains was seen."""
    import ast
    import inspect
    import textwrap
    code = getattr(fn, "__code__", None)
    if code is None or code.co_filename not in files:
        return []
    try:
        lines, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return []
    scope = dict(getattr(fn, "__globals__", {}))
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        callee = scope.get(node.func.id)
        try:
            params = [p for p in inspect.signature(callee).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            continue
        names = {_meaning(p.name) for p in params}
        for arg, slot in zip(node.args, params):
            if isinstance(arg, ast.Starred):
                break
            if isinstance(arg, ast.Name) and _meaning(arg.id) != _meaning(slot.name) and _meaning(arg.id) in names:
                out.append({"file": files[code.co_filename], "line": first + node.lineno - 1,
                            "callee": node.func.id, "argument": arg.id, "slot": slot.name})
    return out[:10]
