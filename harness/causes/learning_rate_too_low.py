from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="learning-rate-too-low",
    title="Learning rate far too low",
    what="The optimizer's learning rate never gets near a useful value (the lesson peaks at 1e-3 with Adam).",
    why="Each update is too small to move the loss within any practical number of steps.",
    symptom="Loss stuck near ln V = 2.565 and never moves.",
    fix="Use Adam with lr=1e-3 (peak after warmup); check the lr your scheduler actually gives with "
        "sched.get_last_lr().",
    lesson="Debugging table, row 4.",
    assignments=(REVERSAL.name,),
    mechanism=("the learning rate read from the student's optimizer during their train(): peak < 5e-5, with the "
               'scheduler stepped'),
    observed=(Observed("lr-schedule", "data.peak", below=5e-5),),
)


def diagnose(ev):
    c = ev.get("lr-schedule")
    if not c or c["status"] != "fail" or ev.status("train-scheduler") == "fail":
        return None          # a scheduler never stepped explains the flat lr (scheduler-not-stepped)
    peak = (c.get("data") or {}).get("peak")
    if peak is None or peak >= 5e-5:
        return None
    return Finding(0.9, [say(c)], c.get("location"), explains=("lr-schedule", "brief-training", "decode-accuracy"))
