"""`lm`: the brief training (check lm-training, a full check) fails where no component's own check does.

When the piece the training located (probes/lm_train_brief.py: trained with that one piece of the student's
and the rest the reference's, it alone leaves the reference's curve) has a failing check of its own, that
component's diagnosis explains the training too (lm_component.py lists lm-training among what it explains).
Otherwise this rule names it: symptom (the curve leaves the reference's, a NaN, one batch not learnt) and
mechanism (the isolation run) both measured. A model located whose forward pass uses tensors model.parameters()
does not hold (lm-parameters fails) is optimizer_missing_parameters.py's, not this rule's. Without a located
piece it is the measured failure only, below 0.5 and on no component. The course's own tests never train the
model, so this finding ranks after what they see (lm_rank.COURSE_INVISIBLE).
"""
from __future__ import annotations

from ..assignments import LM as LM_ASSIGNMENT
from ..lm_table import ADAPTER
from .base import Cause, Finding, say
from .lm_rank import COURSE_INVISIBLE

LM = (LM_ASSIGNMENT.name,)
CHECK = "lm-training"
PARAMETERS = "lm-parameters"      # optimizer_missing_parameters.py names that failure
TRAINING = Cause(
    "training-fails", "Your LM does not train like the reference on the same data",
    "Trained briefly with your own AdamW, cross-entropy, clipping and schedule on the same batches and from the same "
    "weights as the reference, the loss leaves the reference's, turns non-finite or does not learn one batch.",
    "A model that passes every component check can still not learn: the pieces only show what they do together "
    "when the loop runs.",
    "lm-training fails; training with one of your pieces at a time (the rest the reference's) shows which.",
    "Read the located piece again against the handout: it is what makes the curve leave the reference's.",
    assignments=LM)


def located(ev) -> str | None:
    """The component the failing training located, or None."""
    c = ev.get(CHECK)
    if not c or c["status"] != "fail":
        return None
    comp = (c.get("data") or {}).get("component")
    return comp if comp in ADAPTER else None


class TrainingRule:
    CAUSE = TRAINING
    __name__ = "lm_training"

    def diagnose(self, ev):
        c = ev.get(CHECK)
        if not c or c["status"] != "fail":
            return None
        comp = located(ev)
        own = ev.get(f"lm-{comp}") if comp else None
        if own and own["status"] in ("fail", "error"):
            return None                  # that component's own diagnosis explains the training
        if comp == "lm" and ev.failed(PARAMETERS):
            return None                  # the model's parameters missing from model.parameters() explain it
        d = c.get("data") or {}
        culprits = [p for p in d.get("culprits") or [] if isinstance(p, str)]
        if comp and len(culprits) == 1:
            f = Finding(0.85, [f"{comp} ({ADAPTER[comp]}) passes its own check, but trained with it alone (the rest "
                               f"the reference's) the loss leaves the reference's", say(c),
                               "what it costs: " + COURSE_INVISIBLE[TRAINING.id]], c.get("location"),
                        explains=(CHECK,))
            f.component = comp
            return f
        return Finding(0.45, [say(c)], c.get("location"), explains=(CHECK,),
                       title="The brief training fails; no single piece of yours explains it")


RULES = (TrainingRule(),)
CAUSES = (TRAINING,)
