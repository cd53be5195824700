"""The one recorder of torch calls: which ops a piece of code ran, from which of its lines, on what values.

A TorchFunctionMode sees every torch function and Tensor method call made while it is active, whoever makes
it (the student's `torch.softmax`, `scores.masked_fill(...)`, a loss module's inner `F.cross_entropy`), once:
torch leaves the mode while its handler runs, so the calls inside a call are not seen again. Every caller
uses this class with its own options:

- `intercept.watch`: the calls of a few named operations, with their arguments and chosen outputs as given
  and the student's line (the probes' evidence: attention weights, a softmax's dim, a loss's arguments);
- `probes/trace.recorder`: every op with a tensor output, copies of its outputs (and of the inputs of
  attention's ops), for the first divergence between two runs of the same code;
- `probes/lm_divergence.record`: every op, its tensor inputs by identity (the op that made each), for the
  data flow of the student's and the reference's code on one input.

Options: `files` (whose lines count: {path that runs: path shown}), `ops` (a {callable: name} map, else every
op by its name but the `quiet` ones), `outputs` / `inputs` (what is kept of each op), `depth` (how many
frames of the files' stack), `limit` (how many ops at most).
"""
from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
from torch.overrides import TorchFunctionMode

# Ops that only read a tensor's metadata (its size, its type) or iterate it: nothing is computed.
READS = frozenset({"size", "dim", "__get__", "numel", "__len__", "__bool__", "item", "tolist", "is_contiguous",
                   "__format__", "__repr__", "__hash__", "data_ptr", "stride", "element_size", "__index__",
                   "is_floating_point", "get_device", "__iter__", "__contains__"})
# An in-place op that returns None: what it made is its first argument.
IN_PLACE_RETURNS_NONE = frozenset({"__setitem__"})
# The keyword arguments kept (copied) with an op's copied inputs: how fused attention is masked, scaled and
# dropped out.
KWARGS_KEPT = ("attn_mask", "is_causal", "need_weights", "key_padding_mask", "dim", "scale", "dropout_p")
MAX_COPIED_INPUT = 500_000      # elements: a bigger input (an embedding table) is not copied


class Frame(NamedTuple):
    """One frame of a recorded op's stack in the traced files."""
    file: str            # the path shown for the file
    line: int
    token: int           # id(frame): which call of a function (unique while the recorder keeps its frames)
    first: int           # the function's first line


@dataclass
class Op:
    """One recorded torch call. What is filled depends on the recorder's options (None / empty otherwise)."""
    name: str                   # the op's name: the `ops` map's, else the callable's __name__
    line: int | None = None     # the innermost line in the traced files (None: called from elsewhere)
    outs: list = field(default_factory=list)      # outputs="copies": detached copies of the tensor outputs (<= 2)
    index: int = 0                                # position among the recorded ops
    ins: list = field(default_factory=list)       # inputs="copies": detached copies of the tensor arguments
    stack: tuple = ()                             # Frames in the traced files, innermost first (<= depth)
    kwargs: dict = field(default_factory=dict)    # inputs="given": as given; "copies": KWARGS_KEPT, copied
    args: tuple = ()                              # inputs="given": the positional arguments as given
    out: Any = None                               # outputs="given": the returned value as given
    made_by: list = field(default_factory=list)   # inputs="identity": the op that made each tensor input (None:
    out_ids: list = field(default_factory=list)   #   made outside); the outputs' ids
    consumers: list = field(default_factory=list)  # inputs="identity": the ops that took an output of this one
    passes_on: bool = False     # inputs="identity": returns one of its inputs unchanged (.to to the same dtype)
    scalars: tuple = ()         # inputs="identity": the plain numbers it was given (addcdiv_'s value=-step_size)
    violation: float | None = None                # set by a first-divergence search: how far it broke the property

    @property
    def lines(self) -> tuple:
        return tuple(f.line for f in self.stack)


def tensors_in(xs) -> list:
    """The tensors among xs, one level into lists and tuples."""
    out = []
    for x in xs:
        if isinstance(x, torch.Tensor):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            out.extend(t for t in x if isinstance(t, torch.Tensor))
    return out


_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR     # f_back changes


def walk(files: dict, depth: int, frame, keep: list | None = None, upper=None) -> tuple:
    """The frames of `files` from `frame` outwards, innermost first, at most `depth`: the one stack walker.
    keep: a list that holds every frame found, so that their ids (Frame.token) stay unique.
    upper: (a frame, what this walk found from its caller outwards, those frame objects): a walk that reaches
    that frame - running, so its callers wait in their calls as they were when `upper` was made - takes it,
    then the rest from `upper` (a recording's every op walked the whole stack)."""
    out: list[Frame] = []
    f = frame
    stop = upper[0] if upper is not None else None
    while f is not None and len(out) < depth:
        code = f.f_code         # read once: reading it is an audit event, and the child's hook is Python
        shown = files.get(code.co_filename)
        if shown:
            if keep is not None:
                keep.append(f)
            out.append(Frame(shown, f.f_lineno, id(f), code.co_firstlineno))
        if f is stop:
            n = max(0, depth - len(out))
            if keep is not None:
                keep.extend(upper[2][:n])
            return tuple(out) + upper[1][:n]
        f = f.f_back
    return tuple(out)


class Recorder(TorchFunctionMode):
    """Records the torch calls made from `files` while active (`with rec:`), as `Op`s in `rec.ops`.

    files: a path, or {path that runs: path shown}; an op is recorded when one of its frames is in them
      (or its name is in `unplaced`: then with line None).
    ops: {callable: name}: only these calls, under these names; None: every call but the `quiet` names.
    only: of those names, only these.
    outputs: None; "given" (the value returned, for the names in keep_out, None = all); "copies" (detached
      copies of the tensor outputs: a call without one is not recorded; with all_tensors=False, 0-d and meta
      tensors do not count).
    inputs: None; "given" (args and kwargs as given); "copies" (copies of the tensor arguments and KWARGS_KEPT,
      for the names in keep_in, None = all); "identity" (the op that made each tensor input, the consumers of
      each output, the plain numbers given; with outputs="copies").
    """

    def __init__(self, files: str | dict, *, ops: dict | None = None, only=None, quiet=READS, depth: int = 1,
                 limit: int = 20000, unplaced=(), outputs: str | None = None, keep_out=None, all_tensors=False,
                 inputs: str | None = None, keep_in=None):
        super().__init__()
        assert outputs in (None, "given", "copies") and inputs in (None, "given", "copies", "identity")
        assert inputs != "identity" or outputs == "copies"
        self.files = {files: files} if isinstance(files, str) else files
        self.names, self.only, self.quiet, self.depth, self.limit = ops, only, quiet, depth, limit
        self.unplaced, self.outputs, self.keep_out, self.all_tensors = unplaced, outputs, keep_out, all_tensors
        self.inputs, self.keep_in = inputs, keep_in
        self.ops: list[Op] = []
        self.producer: dict[int, int] = {}       # identity: id(tensor) -> index of the op that made (or wrote) it
        self.keep: list = []                     # identity: every tensor and frame seen, alive: ids stay unique
        self.failed: tuple | None = None         # (op, its inputs' producers, their shapes, stack): the first raise
        self.numbers: list = []                  # for a line tracer beside it (lm_divergence.record(numbers=))
        self.stopped = False

    def of(self, name: str) -> list[Op]:
        return [op for op in self.ops if op.name == name]

    # -- leaving torch's stack early (intercept.StepLosses) -------------------------------------------------
    def stop(self) -> bool:
        """Leave torch's mode stack and record nothing more; True if it left. Every torch call pays for an
        active mode (a Python call per op): once a probe has what it needs, this makes the rest of the run
        cost what it costs without the recorder. Only from the top of the stack (a mode the student's code
        entered since stays in force): if it is not on top it goes on recording and says False."""
        if self.stopped:
            return True
        if torch.overrides._get_current_function_mode() is not self:
            return False
        torch.overrides._pop_mode()
        self.stopped = True
        return True

    def resume(self) -> None:
        """Back on top of the stack after stop(), recording again (its `with` then leaves as usual)."""
        if self.stopped:
            torch.overrides._push_mode(self)
            self.stopped = False

    def __enter__(self):
        # The frame of the `with` runs every op recorded, below it; its callers wait in their calls until it
        # leaves (unless it is a generator's, resumed from elsewhere): walked once (_stack). Entered through
        # another frame (ExitStack.enter_context), that frame has returned: no op's walk meets it, each walks
        # the whole stack as before.
        entry = sys._getframe(1)
        self._entry = None if entry.f_code.co_flags & _RESUMABLE else entry
        self._upper = None
        return super().__enter__()

    def __exit__(self, *exc):
        self._entry = self._upper = None
        if not self.stopped:
            return super().__exit__(*exc)
        return None

    # -- recording --------------------------------------------------------------------------------------
    def _name(self, func) -> str | None:
        if self.names is not None:
            name = self.names.get(func)
        else:
            name = getattr(func, "__name__", str(func))
            name = None if name in self.quiet else name
        return None if name is None or (self.only is not None and name not in self.only) else name

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = self._name(func)
        if name is None or len(self.ops) >= self.limit:
            return func(*args, **kwargs)
        identity = self.inputs == "identity"
        given = tensors_in(args) + tensors_in(list(kwargs.values())) if identity else []
        made_by = [self._made(t) for t in given]          # before the call: an in-place op changes its input
        try:
            out = func(*args, **kwargs)
        except Exception:      # the first op that raised, with the values it was given (lm_where.crash_origin)
            self.failed = self.failed or (name, made_by, [tuple(t.shape) for t in given],
                                          self._stack(sys._getframe(1)))
            raise
        outs: list = []
        if self.outputs == "copies":
            outs = [t for t in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(t, torch.Tensor)]
            if out is None and name in IN_PLACE_RETURNS_NONE and args and isinstance(args[0], torch.Tensor):
                outs = [args[0]]
            if not self.all_tensors:
                outs = [t for t in outs if t.dim() > 0 and not t.is_meta]
            if not outs:
                return out
        stack = self._stack(sys._getframe(1))
        if not stack and name not in self.unplaced:
            return out
        op = Op(name, stack[0].line if stack else None, index=len(self.ops), stack=stack)
        if self.outputs == "copies":
            op.outs = [t.detach().clone() for t in outs[:2]]
        elif self.outputs == "given" and (self.keep_out is None or name in self.keep_out):
            op.out = out
        if self.inputs == "given":
            op.args, op.kwargs = args, kwargs
        elif self.inputs == "copies" and (self.keep_in is None or name in self.keep_in):
            op.ins = [a.detach().clone() for a in args
                      if isinstance(a, torch.Tensor) and a.numel() < MAX_COPIED_INPUT]
            op.kwargs = {k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()
                         if k in KWARGS_KEPT}
            if name == "softmax" and len(args) > 1 and isinstance(args[1], int):
                op.kwargs["dim"] = args[1]
            if name == "scaled_dot_product_attention" and len(args) > 4 and isinstance(args[4], (int, float)):
                op.kwargs["dropout_p"] = args[4]          # (query, key, value, attn_mask, dropout_p, ...)
        elif identity:
            self._link(op, name, made_by, outs, args, kwargs)
        self.ops.append(op)
        return out

    def _stack(self, frame) -> tuple:
        keep = self.keep if self.inputs == "identity" else None
        entry = getattr(self, "_entry", None)
        if entry is not None and (self._upper is None or self._upper[3] is not entry.f_back):
            found: list = []
            above = entry.f_back
            self._upper = (entry, walk(self.files, self.depth, above, found) if above is not None else (),
                           tuple(found), above)
        return walk(self.files, self.depth, frame, keep, self._upper if entry is not None else None)

    def _link(self, op: Op, name: str, made_by: list, outs: list, args, kwargs) -> None:
        """inputs="identity": the data flow between this op and the ones that made its inputs."""
        op.made_by, op.out_ids = made_by, [id(t) for t in outs[:2]]
        op.scalars = tuple(float(x) for x in list(args) + list(kwargs.values())
                           if isinstance(x, (int, float)) and not isinstance(x, bool))
        arg_ids = {id(t) for t in tensors_in(args)}
        op.passes_on = id(outs[0]) in arg_ids and not name.endswith("_") and name not in IN_PLACE_RETURNS_NONE
        for p in made_by:
            if p is not None:
                self.ops[p].consumers.append(op.index)
        for t in outs[:2]:
            self.producer[id(t)] = op.index
        self.keep.extend(outs)

    def _made(self, t: torch.Tensor):
        """The op whose output t still is; a parameter rewritten since (load_state_dict copies the given
        weights in without a recorded op) holds an input."""
        p = self.producer.get(id(t))
        if p is not None and isinstance(t, torch.nn.Parameter):
            last = self.ops[p].outs[self.ops[p].out_ids.index(id(t))] if id(t) in self.ops[p].out_ids else None
            if last is None or last.shape != t.shape or not torch.equal(last, t.detach()):
                return None
        return p
