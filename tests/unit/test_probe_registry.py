"""The probe registry (in-process); the side process: tests/integration/test_child_side.py."""
from __future__ import annotations



def test_probe_ids_are_unique_within_an_assignment():
    """The two processes' checks are merged by probe id."""
    from harness.probes import PROBES
    for a in ("reversal", "block", "lm"):
        ids = [p.id for p in PROBES if a in p.assignments]
        assert len(ids) == len(set(ids)), a


def _split(assignment: str, costs: dict, only: str = ""):
    from harness import child_side
    from harness.probes import select
    todo = select(assignment, True, only)
    beside = child_side.plan(todo, True, costs)
    here = [p for p in todo if p not in beside and p.cost != "static"]
    return todo, beside, here


def test_a_recheck_balances_its_two_processes_by_the_checked_runs_timings():
    """child_side.balance: the longest first to the process with less to do; the split ends within the
    largest movable probe's cost of even, and no static probe or order-bound probe moves."""
    from harness.probes import EITHER
    todo, _, _ = _split("reversal", {})
    costs = {p.id: 0.02 + 0.01 * (i % 5) for i, p in enumerate(todo)}
    costs |= {"decode-consistency": 0.28, "decode-batch-rows": 0.32, "train-trace": 0.6, "overfit": 0.31}
    todo, beside, here = _split("reversal", costs)
    a, b = sum(costs[p.id] for p in beside), sum(costs[p.id] for p in here)
    assert abs(a - b) <= max(costs[p.id] for p in beside + here)
    assert all(p.cost != "static" for p in beside) and [p for p in todo if p in beside] == beside   # suite order
    assert all(p.side or p.id in EITHER for p in beside)
    from harness.child_side import plan
    plain = [p.id for p in plan(todo, True)]
    assert plain == ["train-trace", "overfit"]             # without timings: the training probes, as before


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
    from harness.child_side import parse_costs
    assert parse_costs("a:0.5,b:x,:1,c:-1,d:1e9,e:2") == {"a": 0.5, "e": 2.0}
    assert parse_costs("") == {}
