from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="scheduler-not-stepped",
    title="The learning-rate scheduler is created but never stepped",
    what="train() builds an LR scheduler (LambdaLR, OneCycleLR, ...) but never calls scheduler.step(), so the "
         "learning rate stays at its value for step 0.",
    why="With a warmup schedule the initial value is ~0: the model barely learns. Without warmup it trains at a "
        "constant rate the schedule was meant to change.",
    symptom="The loss hardly moves; the learning rate is the same at every step.",
    mechanism="At every optimizer step of the student's train(), the scheduler it holds has the same last_epoch.",
    fix="Call scheduler.step() right after optimizer.step(), once per step.",
    lesson="Step 5: the warmup schedule (LambdaLR) is stepped every step.",
    assignments=(REVERSAL.name,),
    observed=(Observed("train-scheduler", "status", ("fail",)),),
)


def diagnose(ev):
    c = ev.failed("train-scheduler")
    if c is None and (ev.get("train-scheduler") or {}).get("status") == "fail":
        c = ev.get("train-scheduler")       # measured 0 advances: a real measurement
    if not c:
        return None
    return Finding(0.9, [say(c)], c.get("location"),
                   explains=("train-scheduler", "lr-schedule", "brief-training", "decode-accuracy"))
