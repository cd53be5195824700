from ..assignments import REVERSAL
from .base import Cause, Finding, say

CAUSE = Cause(
    id="no-warmup",
    title="No learning-rate warmup",
    what="The learning rate starts at its peak at step 1 instead of rising linearly over the warmup steps.",
    why="Adam's early steps are large and poorly estimated; post-norm transformers are known to diverge or "
        "oscillate without warmup at larger scales (on this small model it often still trains).",
    symptom="lr at step 1 equals the peak (lesson: 2.5e-06 at step 1, 1e-3 from step 400).",
    fix="LambdaLR(opt, lambda s: min((s + 1) / warmup, 1.0)) and sched.step() after every opt.step().",
    lesson="Debugging table, last row.",
    assignments=(REVERSAL.name,),
    mechanism=("the learning rate read from the student's optimizer at the first step is already > 20% of its peak "
               '(RAdam exempt)'),
)


def diagnose(ev):
    c = ev.get("lr-schedule")
    if not c or c["status"] != "fail" or ev.status("train-scheduler") == "fail":
        return None          # a scheduler never stepped explains the flat lr (scheduler-not-stepped)
    d = c.get("data") or {}
    if d.get("optimizer") == "RAdam":
        return None          # RAdam rectifies the early variance that warmup guards against: no warmup needed
    if d.get("peak") is None or d["peak"] < 5e-5 or d.get("first", 0) <= 0.2 * d["peak"]:
        return None
    return Finding(0.85, [say(c)], c.get("location"), explains=("lr-schedule",))
