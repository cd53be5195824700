"""Statement-level and call edits of the repair search (harness/repair/order.py, calls.py, edit.related): each
rule on a short snippet gives the intended text, keeps every other line, and stays silent where its mechanism
is absent; nothing here runs the code."""
from __future__ import annotations

from harness.repair import catalogue, edit, verify

LOOP = """\
import torch


def train(model, steps=10):
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    for step in range(steps):
        loss = model(step)
{body}    return model
"""


def loop(body: str) -> str:
    return LOOP.format(body="".join(f"        {ln}\n" for ln in body.strip("\n").split("\n")))


def line_of(src: str, text: str) -> int:
    return next(i for i, ln in enumerate(src.splitlines(), 1) if text in ln)


def kinds(src, line, kind):
    return [c for c in edit.candidates(src, line, (kind,))]


def body_of(code: str) -> list[str]:
    lines = code.splitlines()
    start = next(i for i, ln in enumerate(lines) if "for step in" in ln) + 1
    return [ln.strip() for ln in lines[start:] if ln.startswith("        ") and ln.strip() != "loss = model(step)"]


def test_zero_grad_inserted_before_backward_when_nothing_zeroes():
    src = loop("loss.backward()\nopt.step()\nsched.step()")
    (c,) = kinds(src, line_of(src, "loss.backward()"), "zero-grad")
    assert body_of(c.code) == ["opt.zero_grad()", "loss.backward()", "opt.step()", "sched.step()"]
    # a loop that zeroes already (before the backward, or after the step) gets no zero-grad edit
    assert kinds(loop("opt.zero_grad()\nloss.backward()\nopt.step()"), 10, "zero-grad") == []
    ok = loop("loss.backward()\nopt.step()\nopt.zero_grad()")
    assert kinds(ok, line_of(ok, "opt.zero_grad()"), "zero-grad") == []


def test_zero_grad_between_backward_and_step_moved_before_backward():
    src = loop("loss.backward()\ntorch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
               "opt.zero_grad(set_to_none=True)\nopt.step()")
    (c,) = kinds(src, line_of(src, "zero_grad"), "zero-grad")
    assert body_of(c.code)[:2] == ["opt.zero_grad(set_to_none=True)", "loss.backward()"]


def test_scheduler_step_added_or_taken_out_of_its_condition():
    src = loop("opt.zero_grad()\nloss.backward()\nopt.step()")
    (c,) = kinds(src, line_of(src, "opt.step()"), "scheduler-step")
    assert body_of(c.code)[-2:] == ["opt.step()", "sched.step()"]
    cond = loop("opt.zero_grad()\nloss.backward()\nopt.step()\nif step % 5 == 0:\n    sched.step()\n    print(step)")
    (c,) = kinds(cond, line_of(cond, "sched.step()"), "scheduler-step")
    assert body_of(c.code) == ["opt.zero_grad()", "loss.backward()", "opt.step()", "sched.step()",
                               "if step % 5 == 0:", "print(step)"]
    # the scheduler stepped at every step already: nothing
    ok = loop("opt.zero_grad()\nloss.backward()\nopt.step()\nsched.step()")
    assert kinds(ok, line_of(ok, "opt.step()"), "scheduler-step") == []


def test_train_mode_only_when_the_loop_calls_a_function_that_sets_eval():
    decode = "\n\ndef decode(model, x):\n    model.eval()\n    return model(x)\n"
    src = loop("opt.zero_grad()\nloss.backward()\nopt.step()\nif step % 5 == 0:\n    decode(model, step)") + decode
    (c,) = kinds(src, line_of(src, "decode(model, step)"), "train-mode")
    assert body_of(c.code)[0] == "model.train()"
    plain = loop("opt.zero_grad()\nloss.backward()\nopt.step()") + decode
    assert kinds(plain, line_of(plain, "opt.step()"), "train-mode") == []


def test_eval_mode_at_the_start_of_a_function_that_runs_a_model_it_is_given():
    src = 'def greedy(model, src):\n    """Decode."""\n    h = model.encode(src)\n    return model.generator(h)\n'
    (c,) = kinds(src, 1, "eval-mode")
    assert c.code.splitlines()[2] == "    model.eval()" and c.code.splitlines()[1] == '    """Decode."""'
    # data, not a model (tensor methods only); a method; a function that already sets a mode: nothing
    assert kinds("def att(q, k):\n    return q.matmul(k.transpose(-2, -1))\n", 1, "eval-mode") == []
    assert kinds("class M:\n    def f(self, m):\n        return m.encode(1)\n", 2, "eval-mode") == []
    assert kinds("def g(model, x):\n    model.eval()\n    return model.encode(x)\n", 1, "eval-mode") == []


def test_moves_out_of_a_condition_drop_and_renormalise():
    src = ("import torch\n\n\ndef att(s, keep):\n    p = s.softmax(dim=-1)\n    p = p * keep   # zero the future\n"
           "    p = p + 0.1 * torch.randn_like(p)\n    return p\n")
    (r,) = kinds(src, 6, "renormalise")
    assert r.code.splitlines()[5:7] == ["    p = p * keep   # zero the future",
                                        "    p = p / p.sum(dim=-1, keepdim=True).clamp_min(1e-9)"]
    labels = {c.label: c.code for c in kinds(src, 7, "order")}
    assert labels["one statement earlier"].splitlines()[4:7] == [
        "    p = s.softmax(dim=-1)", "    p = p + 0.1 * torch.randn_like(p)", "    p = p * keep   # zero the future"]
    assert "one statement later" not in labels            # never after the return
    (d,) = kinds(src, 7, "drop-statement")
    assert "randn_like" not in d.code and "p = p * keep   # zero the future" in d.code
    # an update that adds something other than noise (a positional table, a residual) is never dropped
    pe = "def f(self, x):\n    x = x + self.pe[:x.size(0)]\n    return self.drop(x)\n"
    assert kinds(pe, 2, "drop-statement") == []
    dup = "def f(opt):\n    opt.step()\n    opt.step()\n    return opt\n"
    assert kinds(dup, 3, "drop-statement")[0].code.count("opt.step()") == 1
    # a masked_fill with a large negative (masking scores, not probabilities) is no renormalise site
    other = "def att(s, m):\n    p = s.softmax(-1)\n    s = s.masked_fill(m, -1e9)\n    return p\n"
    assert kinds(other, 3, "renormalise") == []


def test_call_edits():
    src = ("import copy\nimport torch\nimport torch.nn as nn\n\n\ndef build(model, causal, n):\n"
           "    net = copy.deepcopy(model)\n"
           "    opt = torch.optim.AdamW(model.generator.parameters(), lr=1e-3)\n"
           "    if causal is not None:\n        pass\n"
           "    mlp = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.1), nn.Linear(8, 4))\n"
           "    layers = nn.ModuleList([nn.Linear(4, 4)] * n)\n"
           "    kl = p * torch.log(p / q)\n    return net, opt, mlp, layers, kl\n")
    assert kinds(src, 7, "no-copy")[0].code.splitlines()[6] == "    net = model"
    assert "torch.optim.AdamW(model.parameters(), lr=1e-3)" in kinds(src, 8, "all-parameters")[0].code
    assert "    if causal:" in kinds(src, 9, "truthiness")[0].code
    assert "nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 4))" in \
        kinds(src, 11, "activation")[0].code
    assert "nn.ModuleList([nn.Linear(4, 4) for _ in range(n)])" in kinds(src, 12, "distinct")[0].code
    assert "torch.log((p / q).clamp_min(1e-12))" in kinds(src, 13, "finite-log")[0].code
    # with an activation already there, or one Linear: nothing
    assert kinds("import torch.nn as nn\nm = nn.Sequential(nn.Linear(2, 2), nn.GELU(), nn.Linear(2, 2))\n", 2,
                 "activation") == []


def test_init_of_frozen_parameters_and_mask_passed_positionally():
    src = ("import torch.nn as nn\n\n\nclass M(nn.Module):\n    def reset(self):\n"
           "        for p in self.parameters():\n            nn.init.xavier_uniform_(p)\n")
    (c,) = kinds(src, 7, "trained-only")
    assert c.code.splitlines()[6:8] == ["            if p.requires_grad:", "                nn.init.xavier_uniform_(p)"]
    enc = "def encode(self, x, src_mask):\n    for layer in self.layers:\n        x = layer(x)\n    return x\n"
    assert any("x = layer(x, src_mask)" in c.code for c in kinds(enc, 3, "unused-mask"))


def test_related_lines_and_search_order():
    src = ("def f(x, causal, idx):\n    y = x.softmax(-1)\n    if causal is not None:\n        z = y[:, 0]\n"
           "        w = z + 1\n    return w\n")
    assert edit.related(src, 4) == [2, 5, 3]         # made at 2, used at 5, guarded by 3
    d = {"id": "unexplained-failure", "location": {"line": 4}, "evidence": []}
    assert verify.search_lines(d, {}, [], src) == [4, 2, 5, 3]
    assert set(catalogue.FIRST + catalogue.LAST) <= set(catalogue.SEARCH)


def test_search_tries_mechanism_edits_first_and_plain_moves_last():
    """A renormalise on the line after the diagnosed one comes before the diagnosed line's generic edits."""
    src = ("import torch\n\n\ndef att(s, T):\n    a = s.softmax(dim=-1)\n    keep = torch.ones(T, T).tril()\n"
           "    a = a * keep\n    return a\n")
    d = {"id": "unexplained-failure", "confidence": 0.5, "evidence": ["causal-leak: 0.3"], "location": {"line": 6}}
    before = {"causal-leak": {"id": "causal-leak", "status": "fail", "measured": 0.3}}
    seen = []

    def recheck(code, only, extra, gate=""):
        seen.append(code)
        return {"causal-leak": {"id": "causal-leak", "status": "fail", "measured": 0.3}}
    r = verify.try_one(d, src, "m.py", before, set(), recheck)
    assert r is not None and r["verified"] is False
    assert "a / a.sum(dim=-1, keepdim=True)" in seen[0]           # line 7's renormalise first
    assert "torch.ones(T, T).triu()" in seen[1]                   # then line 6's own edits


def test_zero_grad_run_once_before_the_loop_moves_into_it():
    src = ("def train(model, opt, steps):\n    opt.zero_grad()\n    for step in range(steps):\n"
           "        for _ in range(4):\n            model(step).backward()\n        opt.step()\n    return model\n")
    (c,) = kinds(src, 2, "zero-grad")
    assert c.code.splitlines()[1:4] == ["    for step in range(steps):", "        opt.zero_grad()",
                                        "        for _ in range(4):"]
    # before a loop that steps nothing: no edit
    assert kinds("def f(opt, xs):\n    opt.zero_grad()\n    for x in xs:\n        print(x)\n", 2, "zero-grad") == []
