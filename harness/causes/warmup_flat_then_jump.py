from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="warmup-flat-then-jump",
    title="The warm-up holds the learning rate flat near zero, then jumps to the peak in one step",
    what="The warm-up factor is computed with an integer division (step // warmup, int(step / warmup)): it is 0 "
         "for every step of the warm-up and 1 from then on, so the learning rate is 0 for the whole warm-up and "
         "then the full peak at once.",
    why="The warm-up steps are wasted (nothing moves at lr 0), and then Adam takes full-size steps at once: the "
        "sudden start a warm-up exists to avoid, only later. The log prints a schedule, so it looks right.",
    symptom="The loss does not move for the whole warm-up, then lurches when the learning rate appears.",
    mechanism="The learning rate read from the student's optimizer at every step of train() stays under half its "
              "peak for 10 or more steps and then rises by more than half the peak in a single step (check "
              "lr-warmup-ramp).",
    fix="Divide as floats: min((s + 1) / warmup, 1.0), so the factor rises by 1/warmup every step.",
    lesson="Step 5: LambdaLR(opt, lambda s: min((s + 1) / warmup, 1.0)), a linear warm-up.",
    assignments=(REVERSAL.name,),
    observed=(Observed("lr-warmup-ramp", "data.mechanism.kind", ("flat-then-jump",)),),
)


def diagnose(ev):
    c = ev.failed("lr-warmup-ramp")
    if not c or ev.status("train-scheduler") == "fail":
        return None          # a scheduler stepped too rarely makes stairs: scheduler-not-stepped says why
    if ev.mechanism("lr-warmup-ramp").get("kind") != "flat-then-jump":
        return None
    return Finding(0.85, [say(c)], c.get("location"), explains=("lr-warmup-ramp", "lr-schedule"))
