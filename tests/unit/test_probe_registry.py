"""The probe registry (in-process); the side process: tests/integration/test_child_side.py."""
from __future__ import annotations



def test_probe_ids_are_unique_within_an_assignment():
    """The two processes' checks are merged by probe id."""
    from harness.child.probes import select
    for a in ("reversal", "block", "lm"):
        ids = [p.id for p in select(a, False)]       # block's: its one-file pack's own (probes/block_plan.py)
        assert ids and len(ids) == len(set(ids)), a


def _split(assignment: str, costs: dict, only: str = ""):
    from harness.child import side as child_side
    from harness.child.probes import select
    todo = select(assignment, True, only)
    beside, shared = child_side.plan(todo, True, costs)
    here = [p for p in todo if p not in beside and p.cost != "static"]
    assert shared == bool(costs)
    return todo, beside, here


def _drawn_ends(here: list, queue: list, cost) -> tuple[float, float]:
    """When the two processes end: the first runs `here` then draws, the fork draws from the start."""
    ends = [sum(cost(p) for p in here), 0.0]
    for p in queue:                                 # each probe to whichever process is free first
        i = 0 if ends[0] <= ends[1] else 1
        ends[i] += cost(p)
    return ends[0], ends[1]


def test_a_recheck_shares_its_probes_longest_first_and_ends_together_even_when_the_costs_were_wrong():
    """child_side.shares: every probe either process may run, longest first by the checked run's timings, no
    static or order-bound probe among them. Drawn from a queue, the two processes end within one probe of
    each other with the costs the repaired model really has (here overfit twice as long, as when the bug let
    the model memorise sooner), where the old split fixed from the timings leaves one idle for 0.3 s."""
    from harness.child.probes import EITHER
    todo, _, _ = _split("reversal", {})
    costs = {p.id: 0.02 + 0.01 * (i % 5) for i, p in enumerate(todo)}
    costs |= {"decode-consistency": 0.14, "decode-batch-rows": 0.15, "train-trace": 0.37, "overfit": 0.16}
    todo, queue, here = _split("reversal", costs)
    assert [costs[p.id] for p in queue] == sorted((costs[p.id] for p in queue), reverse=True)
    assert all(p.cost != "static" and (p.side or p.id in EITHER) for p in queue)
    really = dict(costs, overfit=0.32)
    a, b = _drawn_ends([p for p in here if p not in queue], queue, lambda p: really[p.id])
    assert abs(a - b) <= max(really.values())
    fixed = [[], []]                     # the split the timings alone fix: the longest first to the emptier side
    for p in queue:
        fixed[sum(costs[x.id] for x in fixed[1]) < sum(costs[x.id] for x in fixed[0])].append(p)
    gap = abs(sum(really[p.id] for p in fixed[0]) - sum(really[p.id] for p in fixed[1]))
    assert abs(a - b) < gap - 0.1, (a, b, gap)
    from harness.child.side import plan
    plain, shared = plan(todo, True)
    assert [p.id for p in plain] == ["train-trace", "overfit"] and not shared   # without timings: as before


def test_a_lone_probe_needs_no_fork_and_unsafe_probes_stay_here():
    _, beside, _ = _split("reversal", {"attn-rows-sum": 0.04}, only="attn-rows-sum")
    assert beside == []
    _, beside, _ = _split("block", {"block-causal-off": 0.5, "block-causal": 0.5, "block-rows-sum": 0.01},
                          only="block-causal-off,block-causal,block-rows-sum")
    assert [p.id for p in beside] == ["block-rows-sum"]    # the causal pair shares what the first one found
    lm_costs = {f"lm-{c}": 0.3 for c in ("linear", "embedding", "rmsnorm", "swiglu", "rope")}
    _, beside, here = _split("lm", lm_costs)
    assert all(p.side for p in beside)                     # lm's probes share located lines: only side ones move


def test_costs_from_the_wire_keep_only_what_parses():
    from harness.child.side import parse_costs
    assert parse_costs("a:0.5,b:x,:1,c:-1,d:1e9,e:2") == {"a": 0.5, "e": 2.0}
    assert parse_costs("") == {}


def _c(cid: str, status: str) -> dict:
    return {"id": cid, "status": status}


def test_a_gate_stops_a_recheck_by_the_rule_a_repair_is_verified_by():
    """child_side.gate_fails says a probe's checks fail the gate exactly when checks.passes would reject them,
    and only for gate checks of that probe."""
    from harness.checks import passes
    from harness.child.side import gate_fails, parse_gate
    gate = parse_gate("causal-leak,,train-shift")
    assert gate == {"causal-leak", "train-shift"}
    assert gate_fails([_c("causal-leak", "fail")], gate, "causal-leak")
    assert not gate_fails([_c("causal-leak", "pass")], gate, "causal-leak")
    assert gate_fails([_c("causal-leak", "skip")], gate, "causal-leak")     # not measured is not repaired
    # train-shift is one of train-trace's checks: its probe's error check (no train-shift) fails the gate
    assert gate_fails([_c("train-trace", "error")], gate, "train-trace")
    assert not gate_fails([_c("train-zero-grad", "pass"), _c("train-shift", "pass")], gate, "train-trace")
    assert gate_fails([_c("train-zero-grad", "fail"), _c("train-shift", "pass")], frozenset({"train-trace"}),
                      "train-trace")
    # another probe's failures are none of the gate's business
    assert not gate_fails([_c("attn-rows-sum", "fail")], gate, "attn-rows-sum")
    assert not gate_fails([], gate, "overfit")
    for checks, probe in (([_c("causal-leak", "fail")], "causal-leak"), ([_c("train-trace", "error")], "train-trace"),
                          ([_c("train-shift", "pass")], "train-trace")):
        after = {c["id"]: c for c in checks}
        mine = [g for g in gate if g in after or g == "train-shift" and probe == "train-trace"]
        assert gate_fails(checks, gate, probe) == (not passes(after, mine))


def test_a_gated_recheck_keeps_the_gates_probes_in_the_first_process():
    """The first process reads the fork's gate only between its own probes: a failing gate probe there would
    wait for the first process's longest probe, so with timings the gate's probes stay here."""
    from harness.child import side as child_side
    from harness.child.probes import select
    todo = select("reversal", True)
    costs = {p.id: 0.05 for p in todo} | {"overfit": 1.2, "causal-leak": 0.9, "train-trace": 0.5}
    assert "causal-leak" in [p.id for p in child_side.plan(todo, True, costs)[0]]      # shared
    beside, _ = child_side.plan(todo, True, costs, frozenset({"causal-leak", "train-shift"}))
    assert {"causal-leak", "train-trace"}.isdisjoint(p.id for p in beside) and beside
    # a gate probe runs after what the suite runs before it, here and in order: none of those is shared
    ids = [p.id for p in todo if p.cost != "static"]
    before_leak = set(ids[:ids.index("causal-leak")])
    beside, _ = child_side.plan(todo, True, costs, frozenset({"causal-leak"}))
    assert before_leak and before_leak.isdisjoint(p.id for p in beside)
    assert {p.id for p in beside} == set(ids[ids.index("causal-leak") + 1:])
    beside, _ = child_side.plan(todo, True, costs, frozenset({"train-shift"}))     # a training probe's own
    assert {p.id for p in beside} == set(ids) - {"train-trace"}      # no training probe runs before it


def test_a_forks_stop_line_counts_only_in_a_recheck_with_a_gate():
    """child_side._take: `G<id>` from the fork stops the first process only when the run has a gate (a plain
    check never stops early, whatever student code in the fork writes on the pipe); the report stays whole."""
    from harness.child import side as child_side
    from harness.child.probes import select
    probes = [p for p in select("reversal", True) if p.id in ("train-trace", "overfit")]
    sent = []
    for gate, expect in ((frozenset(), ""), (frozenset({"train-shift"}), "train-trace")):
        side = child_side.Side(0, -1, probes, b"k", gate)
        child_side._take(side, b"Ptrain-trace\nGtrain-trace\nGnot-a-probe\nRk{\"checks\": {}}", sent.append)
        assert side.gated == expect and side.buf == b'Rk{"checks": {}}'
        child_side._take(side, b"", sent.append)
        assert side.ended
    assert sent == [{"event": "phase", "name": "train-trace"}] * 2
