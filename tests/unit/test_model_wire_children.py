"""The model server's requests for the role probes that look inside a module (support.trace, received_mask,
run_child, parameter_order, course's parameter writes): the server's side measured against the in-process helpers
on the same module, and the prober's side against a fake server that answers what a hostile one could."""
from __future__ import annotations

import os
import socket
import threading

import pytest
import torch
from torch import nn

from harness.child import modelwire as wire
from harness.child.modelserver import Server
from harness.child.probes.roles import remote, support


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.attn, self.out = nn.LayerNorm(4), nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x, mask=None):
        h = self.attn(x) if mask is None else self.attn(x) * mask.float()
        return self.out(self.norm(h + x))


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Passes()

    def forward(self, x, mask):
        return self.inner(x, mask)


class Passes(nn.Module):
    def forward(self, x, mask):
        return x.masked_fill(~mask, 0.0)


def _server(m: nn.Module) -> tuple:
    s = Server(-1, ".")
    return s, s._keep(m)


def test_the_servers_child_records_are_what_the_in_process_trace_sees():
    torch.manual_seed(0)
    m, x = Block(), torch.randn(2, 3, 4)
    s, h = _server(m)
    ans = s.call(h, "__call__", (x,), {}, record=["child"])
    mine = [[r["name"], r["input"], r["output"]] for r in ans["records"]]
    theirs = support.trace(m, lambda: m(x))
    assert [r[0] for r in mine] == [r[0] for r in theirs] == ["attn", "norm", "out"]
    for a, b in zip(mine, theirs):
        assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2])


def test_the_server_says_whether_a_submodule_was_handed_the_mask_by_value():
    m, x = Masked(), torch.randn(2, 3)
    mask = torch.tensor([[True, False, True], [False, True, True]])
    s, h = _server(m)
    seen = s.call(h, "__call__", (x, mask), {}, record=["seen"], seen=mask.clone())["records"]
    other = s.call(h, "__call__", (x, mask), {}, record=["seen"], seen=~mask)["records"]
    assert seen == [{"op": "seen"}] and other == []
    assert support.received_mask(m, mask, lambda: m(x, mask)) is True


def test_the_server_calls_a_named_child_alone_and_refuses_a_name_it_lacks():
    torch.manual_seed(0)
    m, x = Block(), torch.randn(2, 4)
    s, h = _server(m)
    assert torch.equal(s.call(h, "__call__", (x,), {}, child="attn")["value"], m.attn(x))
    with pytest.raises(KeyError, match="no submodule"):
        s.call(h, "__call__", (x,), {}, child="nothere")


def test_the_server_assigns_parameters_by_name_shape_kept_dtype_may_change():
    m = Block()
    s, h = _server(m)
    s.assign(h, [["attn.bias", torch.arange(4, dtype=torch.float64)]])
    assert m.attn.bias.dtype == torch.float64 and m.attn.bias.tolist() == [0, 1, 2, 3]
    with pytest.raises(KeyError):
        s.assign(h, [["attn.bias", torch.zeros(5)]])
    with pytest.raises(KeyError):
        s.assign(h, [["attn.nothere", torch.zeros(4)]])


def _proxy(answers, params=None, names=None):
    a, b = socket.socketpair()
    client = remote.Client(a.fileno(), {"cs231n/layers.py": 40}, timeout_s=5)
    info = {"owner": "Block", "params": params or [], "file": "cs231n/layers.py"}
    if names is not None:
        info["names"] = names
    cls = remote.remote_class(client, "Block", info, None)
    got: list = []

    mine = os.dup(b.fileno())   # this thread's own descriptor: a number the next test cannot be given while it runs

    def run():
        try:
            for make in [lambda r: {"handle": 3}] + list(answers):
                try:
                    req = wire.read(mine, None)
                except (EOFError, OSError):         # the test ended without this request
                    return
                got.append(req)
                wire.write(mine, dict(make(req), id=req.get("id")))
        except OSError:                             # the test ended while it answered
            return
        finally:
            os.close(mine)
    threading.Thread(target=run, daemon=True).start()
    return cls, got, (a, b)


def test_a_hostile_servers_child_records_are_dropped_and_the_rest_read():
    t = torch.ones(2)
    cls, got, _ = _proxy([lambda r: {"value": t, "records": [
        {"op": "child", "name": "attn", "input": t, "output": t * 2},
        {"op": "child", "name": "x" * 5000, "input": t, "output": t},
        {"op": "child", "name": 7, "input": t, "output": t},
        {"op": "child", "name": "norm", "input": "rm -rf", "output": t},
        {"op": "child", "name": "out", "input": None, "output": None}]}])
    m = cls()
    rows = support.trace(m, lambda: m(t))
    assert got[-1]["record"] == ["child"]
    assert [r[0] for r in rows] == ["attn", "out"] and torch.equal(rows[0][2], t * 2) and rows[1][1] is None


def test_received_mask_sends_the_mask_and_reads_only_a_seen_record():
    mask = torch.tril(torch.ones(3, 3, dtype=torch.bool))
    cls, got, _ = _proxy([lambda r: {"value": None, "records": [{"op": "seen"}]},
                          lambda r: {"value": None, "records": [{"op": "verdict", "status": "pass"}]}])
    m = cls()
    assert support.received_mask(m, mask, lambda: m(mask)) is True
    assert got[-1]["record"] == ["seen"] and torch.equal(got[-1]["seen"], mask)
    assert support.received_mask(m, mask, lambda: m(mask)) is False


def test_run_child_names_the_child_and_a_failure_there_is_the_students_line():
    class Ctx:
        class binding:
            component = "Block"
    cls, got, _ = _proxy([lambda r: {"value": torch.zeros(2)},
                          lambda r: {"error": {"type": "RuntimeError", "message": "boom", "file": "cs231n/layers.py",
                                               "line": 21}}])
    m = cls()
    assert torch.equal(support.run_child(Ctx, m, "attn", torch.ones(2)), torch.zeros(2))
    assert got[-1]["child"] == "attn" and got[-1]["method"] == "__call__"
    with pytest.raises(support.StudentFailure) as e:
        support.run_child(Ctx, m, "attn", torch.ones(2))
    assert e.value.line == 21


def test_constructor_names_from_the_server_are_checked_before_parameter_order_reads_them():
    cls, _, socks = _proxy([], names=["embed_dim", "num_heads", "not a name", "x" * 500, 3, "args"])
    assert remote.parameter_names(cls) == ["embed_dim", "num_heads", "args"]
    many, _, socks2 = _proxy([], names=["a"] * 65)
    assert remote.parameter_names(many) is None
    absent, _, socks3 = _proxy([])
    assert remote.parameter_names(absent) is None
    for s in socks + socks2 + socks3:
        s.close()


class Moded(nn.Module):
    """Its output says its mode, and each train() call is counted (a student's override of train())."""

    def __init__(self):
        super().__init__()
        self.switches = 0

    def train(self, mode: bool = True):
        self.switches += 1
        return super().train(mode)

    def forward(self, x):
        return x + (1.0 if self.training else 0.0)


def test_train_and_eval_ride_with_the_next_request_applied_in_order():
    """A mode switch costs no round trip of its own (issue 45's cost): the server applies the switches in order
    before the next request, so what that request sees is what an in-process call would."""
    a, b = socket.socketpair()
    server = Server(b.fileno(), ".")
    mods = [Moded(), Moded()]
    handles = [server._keep(m) for m in mods]
    threading.Thread(target=server.serve, daemon=True).start()
    client = remote.Client(a.fileno())
    cls = remote.remote_class(client, "c", {"owner": "Moded", "params": []}, None)
    one, two = remote.RemoteModule(client, handles[0], cls), remote.RemoteModule(client, handles[1], cls)
    one.eval(), two.eval(), one.train(), one.eval()
    assert client.sent == 0 and not one.training and client.modes == [[1, False], [2, False], [1, True], [1, False]]
    x = torch.zeros(2)
    assert torch.equal(one(x), x) and torch.equal(two(x), x) and client.sent == 2 and client.modes == []
    assert [m.switches for m in mods] == [3, 1] and not mods[0].training and not mods[1].training
    two.train()
    assert torch.equal(two(x), x + 1)
    for _ in range(remote.MAX_MODES):      # a probe that only switches: sent on its own now and then
        one.train()
    assert client.sent == 4 and client.modes == [] and mods[0].training
    a.close()


def test_malformed_modes_are_refused_before_anything_runs():
    m = Moded()
    s, h = _server(m)
    for bad in ([[h, 1]], [[h]], [["1", True]], "x", [[h, True]] * (remote.MAX_MODES + 1)):
        with pytest.raises(ValueError, match="modes"):
            s.mode(bad)
    assert m.switches == 0
    s.mode([[h, False]])
    assert m.switches == 1 and not m.training


def test_the_servers_backward_gives_autograds_gradients_bit_for_bit():
    """One output: its vector-Jacobian product through a sum (no import of autograd's explicit-gradient path);
    several: autograd's own; either way the gradients autograd.backward(outputs, grads) gives in process."""
    torch.manual_seed(0)
    ref, x = Block(), torch.randn(2, 3, 4)
    grads = [torch.randn(2, 3, 4), torch.randn(2, 3, 4)]
    for n in (1, 2):
        ref.zero_grad()
        outs = [ref(x * (i + 1)) for i in range(n)]
        torch.autograd.backward(outs, grads[:n])
        m = Block()
        m.load_state_dict(ref.state_dict())
        s, h = _server(m)
        graphs = [s.call(h, "__call__", (x * (i + 1),), {})["graph"] for i in range(n)]
        if n == 1:
            s.backward(graphs[0], [grads[0]])
        else:           # two outputs of one graph: as a model returning a tuple
            s.graphs[graphs[1]] = s.graphs[graphs[0]] + s.graphs[graphs[1]]
            s.backward(graphs[1], grads[:2])
        for (k, p), q in zip(m.named_parameters(), ref.parameters()):
            assert torch.equal(p.grad, q.grad), (n, k)
