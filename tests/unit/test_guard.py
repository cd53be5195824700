"""The tamper guard's fast path (harness/child/guard.py): what it compares without id() still sends every change
to the exact comparison, which names it and puts the original back."""
from __future__ import annotations


import pytest
import torch.nn.functional as F

from harness.child.capture import capture


@pytest.fixture()
def guard():
    g = capture()
    assert g.check() == []            # a fresh record: nothing changed
    return g


def _hot_function(g, want):
    return next(f for f in g._hot_funcs.fs if want(f))


def test_a_replaced_torch_function_is_found_and_put_back(guard):
    orig = F.softmax
    F.softmax = lambda *a, **k: None
    try:
        found = guard.check(hot=True)
    finally:
        if F.softmax is not orig:
            F.softmax = orig
    assert any("softmax replaced" in f for f in found), found
    assert F.softmax is orig


def test_rewritten_defaults_are_found_and_put_back(guard):
    f = _hot_function(guard, lambda f: f.__defaults__)
    before = f.__defaults__
    f.__defaults__ = tuple(object() for _ in before)
    found = guard.check(hot=True)
    assert any("rewritten" in x for x in found), found
    assert f.__defaults__ == before


def test_keyword_defaults_changed_in_place_are_found(guard):
    """The dict of keyword defaults is mutable: changing it in place leaves the function's references alone."""
    f = _hot_function(guard, lambda f: f.__kwdefaults__)
    key = next(iter(f.__kwdefaults__))
    was = f.__kwdefaults__[key]
    f.__kwdefaults__[key] = object()
    found = guard.check(hot=True)
    assert any("rewritten" in x for x in found), found
    assert f.__kwdefaults__[key] is was


def test_a_changed_cell_is_found(guard):
    f = _hot_function(guard, lambda f: f.__closure__ and all(_full(c) for c in f.__closure__))
    cell = f.__closure__[0]
    was = cell.cell_contents
    cell.cell_contents = object()
    found = guard.check(hot=True)
    assert any("rewritten" in x for x in found), found
    assert cell.cell_contents is was


def test_a_container_changed_in_place_is_found_and_put_back(guard):
    label, obj, saved = next(c for c in guard.containers if c[0] == "harness.scan._DYNAMIC_CALLS")
    key = next(iter(obj))
    was = obj[key]
    obj[key] = "something else"                  # a value replaced: same keys, same length
    found = guard.check()
    assert any(label in x and "modified" in x for x in found), found
    assert obj[key] is was and obj == saved


def test_a_name_added_to_the_shared_builtins_dict_is_found_once_and_removed(guard):
    """Every module's __builtins__ is the one builtins dict: compared once, still caught and put back."""
    import builtins
    assert sum(1 for _, obj, _ in guard.containers if obj is builtins.__dict__) > 1
    builtins.__dict__["mtxdiag_extra_name"] = 1
    found = guard.check(hot=True)
    assert [x for x in found if "__builtins__ modified" in x], found
    assert "mtxdiag_extra_name" not in builtins.__dict__


def test_unchanged_after_a_finding_stays_quiet(guard):
    orig = F.relu
    F.relu = lambda *a, **k: None
    assert guard.check(hot=True)
    assert F.relu is orig
    assert guard.check(hot=True) == [] and guard.check() == []   # the snapshot follows the put-back state


def _full(c) -> bool:
    try:
        c.cell_contents
        return True
    except ValueError:
        return False




def test_frame_hooks_left_behind_are_found_put_back_and_told(guard):
    """threading.settrace (every new thread's frames) and a signal handler (the interrupted frame) have no audit
    event: the guard compares them after each call, puts them back and tells them (hookwatch.py)."""
    import signal
    import threading
    told = []
    guard.audit = type("Audit", (), {"introspected": lambda self, what, line: told.append(what)})()
    token = guard.enter()
    old = signal.getsignal(signal.SIGUSR2)
    signal.signal(signal.SIGUSR2, lambda signum, frame: None)
    threading.settrace(lambda *a: None)
    try:
        found = guard.check("a call", token, hot=True)
    finally:
        threading.settrace(None)
        signal.signal(signal.SIGUSR2, old)
    assert any("threading.settrace" in f for f in found) and any("SIGUSR2" in f for f in found), found
    assert len(told) == 2, told
    assert threading._trace_hook is None and signal.getsignal(signal.SIGUSR2) is old
