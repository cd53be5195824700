"""The model server's wire (harness/child/modelwire.py) and the prober's client (probes/roles/remote.py), in
process: a fake server on the other end of a socketpair answers what a hostile one could. Tensors cross by value;
a malformed message is an error, never an object; what the server says is checked before a probe reads it."""
from __future__ import annotations

import json
import socket
import struct
import threading

import numpy as np
import pytest
import torch

from harness.child import modelwire as wire
from harness.child.probes.roles import observe, remote


def _pair():
    a, b = socket.socketpair()
    return a, b


def test_tensors_arrays_and_plain_values_round_trip_by_value():
    a, b = _pair()
    x = torch.randn(2, 3, dtype=torch.float64)
    msg = {"t": x, "m": torch.tril(torch.ones(3, 3, dtype=torch.bool)), "i": torch.arange(4), "np": np.ones((2, 2)),
           "tuple": (1, 2.5, "s", None), "list": [torch.zeros(0, 5)], "half": torch.ones(2, dtype=torch.bfloat16)}
    wire.write(a.fileno(), msg)
    got = wire.read(b.fileno(), None)
    assert torch.equal(got["t"], x) and got["t"].dtype == torch.float64
    assert got["t"].data_ptr() != x.data_ptr()
    assert got["m"].dtype == torch.bool and torch.equal(got["m"], msg["m"])
    assert torch.equal(got["i"], msg["i"]) and isinstance(got["np"], np.ndarray)
    assert got["tuple"] == (1, 2.5, "s", None) and tuple(got["list"][0].shape) == (0, 5)
    assert got["half"].dtype == torch.bfloat16


def _raw(fd, doc: dict, body: bytes = b""):
    text = json.dumps(doc).encode()
    fd.sendall(struct.pack(">IQ", len(text), len(body)) + text + body)


@pytest.mark.parametrize("doc,body,why", [
    ({"body": {"$t": 0}, "tensors": [{"dtype": "float32", "shape": [2], "offset": 0, "nbytes": 4}]}, b"\0" * 8,
     "bytes do not match"),
    ({"body": {"$t": 0}, "tensors": [{"dtype": "object", "shape": [1], "offset": 0, "nbytes": 8}]}, b"\0" * 8,
     "unknown dtype"),
    ({"body": {"$t": 3}, "tensors": []}, b"", "out of range"),
    ({"body": 1, "tensors": [{"dtype": "float32", "shape": [-1], "offset": 0, "nbytes": 4}]}, b"\0" * 4, "shape"),
    ({"nobody": 1}, b"", "no tensor list"),
])
def test_a_malformed_message_is_an_error_never_an_object(doc, body, why):
    a, b = _pair()
    _raw(a, doc, body)
    with pytest.raises(wire.WireError, match=why):
        wire.read(b.fileno(), None)


def test_an_oversized_header_is_refused_before_it_is_read():
    a, b = _pair()
    a.sendall(struct.pack(">IQ", wire.MAX_JSON + 1, 0))
    with pytest.raises(wire.WireError, match="over the limit"):
        wire.read(b.fileno(), None)


def test_pickle_is_never_used():
    text = open(wire.__file__).read() + open(remote.__file__).read()
    assert "pickle" not in text.replace("no pickle", "").replace("No pickle", "")


def _serve(sock, answers):
    """A fake server: reads each request, answers with answers[i](request)."""
    def run():
        for make in answers:
            req = wire.read(sock.fileno(), None)
            ans = make(req)
            if isinstance(ans, bytes):
                sock.sendall(ans)
            else:
                wire.write(sock.fileno(), dict(ans, id=req.get("id")))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_the_servers_error_keeps_its_type_name_and_only_a_line_within_the_file():
    a, b = _pair()
    client = remote.Client(a.fileno(), {"cs231n/layers.py": 40}, timeout_s=5)
    _serve(b, [lambda r: {"error": {"type": "ValueError", "message": "x" * 5000, "file": "cs231n/layers.py",
                                    "line": 12}},
               lambda r: {"error": {"type": "not a name!", "message": "m", "file": "cs231n/layers.py",
                                    "line": 999}},
               lambda r: {"error": {"type": "KeyError", "message": "m", "file": "/opt/mtxdiag/harness/x.py",
                                    "line": 3}}])
    with pytest.raises(remote.RemoteFailure) as e:
        client.request("call")
    assert type(e.value).__name__ == "ValueError" and e.value.line == 12 and len(str(e.value)) <= 1000
    with pytest.raises(remote.RemoteFailure) as e:
        client.request("call")
    assert type(e.value).__name__ == "Exception" and e.value.line is None      # past the file's end: dropped
    with pytest.raises(remote.RemoteFailure) as e:
        client.request("call")
    assert e.value.line is None and e.value.file is None                      # not the student's file


def test_a_server_that_answers_garbage_hangs_or_ends_is_lost_with_the_reason():
    a, b = _pair()
    client = remote.Client(a.fileno(), {}, timeout_s=1)
    _serve(b, [lambda r: b"\0\0\0\x05\0\0\0\0\0\0\0\0{not}"])
    with pytest.raises(remote.ServerLost, match="malformed"):
        client.request("call")
    with pytest.raises(remote.ServerLost, match="gone"):
        client.request("call")                     # lost once, lost for the rest of the run
    a, b = _pair()
    client = remote.Client(a.fileno(), {}, timeout_s=0.5)
    with pytest.raises(remote.ServerLost, match="hangs"):
        client.request("call")
    b.close()
    a2, b2 = _pair()
    b2.close()
    with pytest.raises(remote.ServerLost, match="ended"):
        remote.Client(a2.fileno(), {}, timeout_s=1).request("call")


def test_a_late_answer_to_an_interrupted_request_is_skipped():
    a, b = _pair()
    client = remote.Client(a.fileno(), {}, timeout_s=5)
    client.sent = 4
    wire.write(b.fileno(), {"id": 4, "value": torch.ones(1)})      # the answer to request 4, arriving late
    _serve(b, [lambda r: {"value": torch.zeros(2)}])
    assert torch.equal(client.request("call")["value"], torch.zeros(2))


def test_forged_op_records_can_only_misplace_a_line_within_the_students_file():
    a, b = _pair()
    client = remote.Client(a.fileno(), {"cs231n/layers.py": 40}, timeout_s=5)
    cls = remote.remote_class(client, "MultiHeadAttention", {"owner": "MultiHeadAttention", "params": ["embed_dim"],
                                                            "file": "cs231n/layers.py"}, "sub/cs231n/layers.py")
    w = torch.softmax(torch.randn(2, 4, 6), -1)
    _serve(b, [lambda r: {"handle": 7},
               lambda r: {"value": torch.zeros(2, 4, 8), "records": [
                   {"op": "softmax", "line": 30, "value": w}, {"op": "softmax", "line": 10 ** 6, "value": w},
                   {"op": "verdict", "status": "pass"}, {"op": "softmax", "line": 3, "value": "not a tensor"}]}])
    m = cls(embed_dim=8)
    seen = observe.softmaxes(m, lambda: m(torch.zeros(2, 4, 8)))
    assert [ln for ln, _ in seen] == [30, None] and torch.equal(seen[0][1], w)


def test_torchs_module_api_the_proxy_lacks_is_the_probes_limit_not_the_students_error():
    a, b = _pair()
    client = remote.Client(a.fileno(), {}, timeout_s=1)
    cls = remote.remote_class(client, "C", {"owner": "C", "params": []}, None)
    _serve(b, [lambda r: {"handle": 1}])
    m = cls()
    with pytest.raises(AttributeError, match="does not offer"):
        m.register_forward_hook(print)              # (its submodules it reads from the server: remote_ops)
    assert callable(m.sample)                   # the student's own methods are requests


def test_the_round_trips_are_counted_and_the_servers_own_seconds_only_when_a_bounded_number():
    """bench/pack_split.py --breakdown reads them from the result's timings: what a hostile server says it took
    counts only as a plain bounded float, and never breaks the request."""
    a, b = _pair()
    timings: dict = {}
    client = remote.Client(a.fileno(), {}, timeout_s=5, costs=timings)
    _serve(b, [lambda r: {"value": 1, "took": 0.25}, lambda r: {"value": 2, "took": "x" * 100},
               lambda r: {"value": 3, "took": float("inf")}, lambda r: {"value": 4, "took": True}])
    assert [client.request("call")["value"] for _ in range(3)] + [client.request("build")["value"]] == [1, 2, 3, 4]
    assert timings["server.call"] == 3 and timings["server.build"] == 1
    assert timings["server.call_work_s"] == 0.25 and "server.build_work_s" not in timings
    assert 0 < timings["server.call_s"] < 5 and 0 < timings["server.build_s"] < 5


def test_a_recorder_active_in_the_prober_is_served_there_and_its_forged_records_only_misplace_a_line():
    """A one-file pack's recorder (intercept.watch) goes with the call as its options; what comes back becomes its
    Ops only where each frame's line lies in the student's file and the values are tensors or plain values."""
    from harness.child.intercept import watch
    a, b = _pair()
    client = remote.Client(a.fileno(), {"submission.py": 40}, timeout_s=5)
    client.code_path, client.code_rel = "/run/submission.py", "submission.py"
    w = torch.softmax(torch.randn(2, 3, 3), -1)
    sent: dict = {}

    def answer(req):
        sent.update(req)
        return {"value": torch.zeros(3, 4), "watched": [[
            {"op": "softmax", "stack": [[12, 1, 10]], "args": [w, -1], "kwargs": {"dim": -1}, "out": w},
            {"op": "softmax", "stack": [[10 ** 6, 1, 1]], "out": w},                 # past the file's end: dropped
            {"op": "softmax", "stack": "line 3", "out": w},                          # not a stack: dropped
            {"op": "x" * 500, "stack": [[5, 1, 1]]},                                 # not a name: dropped
            {"op": "masked_fill", "stack": [[7, 2, 7]], "args": [object.__name__, {"$weird": 1}]}]]}
    _serve(b, [answer])
    fn = remote.RemoteCallable(client, "positional_encoding", "submission.py")
    rec = watch("/run/submission.py")
    with rec:
        out = fn(3, 4)
    assert torch.equal(out, torch.zeros(3, 4))
    cfg = sent["watch"][0]
    assert sent["file"] == "submission.py" and ["torch.softmax", "softmax"] in cfg["ops"] and cfg["inputs"] == "given"
    assert [(op.name, op.line) for op in rec.ops] == [("softmax", 12), ("masked_fill", 7)]
    assert torch.equal(rec.ops[0].out, w) and rec.ops[0].args[1] == -1 and rec.ops[0].stack[0].file == "/run/submission.py"
    assert rec.ops[1].args == ("object", None)                 # what is not a tensor or a plain value: None


def test_the_server_says_a_submodule_tree_the_prober_reads_by_class_never_by_its_word_alone():
    from harness.child.probes.roles import remote_ops
    cls = type("TransformerBlock", (), {})
    rows = [["", "TransformerBlock", "submission", True, []],
            ["attn", "MultiHeadAttention", "submission", True, []],
            ["attn.qkv", "Linear", "torch.nn.modules.linear", False, [["weight", [48, 16]], ["bias", [48]]]],
            ["ln", "LayerNorm", "torch.nn.modules.normalization", False, [["weight", [16]]]],
            ["evil", "Linear", "os", False, []],                              # not torch's: no torch class
            ["orphan.child", "Linear", "torch.nn.modules.linear", False, []],  # no parent: dropped
            "not a row"]
    subs = dict(remote_ops.submodules(object(), rows, {"TransformerBlock": cls}))
    assert list(subs) == ["", "attn", "attn.qkv", "ln", "evil"]
    assert isinstance(subs["attn.qkv"], torch.nn.Linear) and isinstance(subs["ln"], torch.nn.LayerNorm)
    assert not isinstance(subs["evil"], torch.nn.Module) and type(subs["evil"]).__name__ == "Linear"
    assert isinstance(subs[""], cls) and [n for n, _ in subs[""].named_children()] == ["attn", "ln", "evil"]
    assert subs["attn.qkv"]._params == {"weight": (48, 16), "bias": (48,)}
