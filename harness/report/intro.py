"""The introduction of each report section: every number read from the declarations (checks.py)."""
from __future__ import annotations

from ..checks import BY_ID, num, value

_LR_PEAK, _LR_WARMUP = value("lr-schedule", "lesson_peak"), value("lr-schedule", "lesson_warmup")
INTRO = {
    "cross-attention": f"Your model is trained briefly with your own train() ({value('brief-training', 'steps')} "
                       f"steps, batch {value('brief-training', 'batch')}), then run on one 6-digit source. Reversal needs target position i to attend to source position n-1-i: a bright "
                       "band from the top right to the bottom left, the anti-diagonal. A bright main diagonal means "
                       "the model copies instead of reversing (was the data reversed?); a uniform field means the "
                       "source is ignored (is memory reaching every decoder layer?). The first maps are teacher-forced: "
                       "the correct previous tokens are fed in and each row is your model's prediction at that target "
                       "position (* marks one that differs from the correct next token). The last picture feeds back "
                       "your model's own greedy decode instead, as it runs for real: a model that sees the future "
                       "looks right teacher-forced and goes wrong there. Columns are the source tokens; colour runs "
                       "from 0 to 1.",
    "training": f"Loss, learning rate and gradient norm per optimizer step of your train() during the brief training "
                f"({value('brief-training', 'steps')} steps, batch {value('brief-training', 'batch')}). "
                f"Correct code starts at {BY_ID['first-loss'].correct} and falls steadily; stuck near ln 13 = 2.565 "
                f"means nothing is learned (learning rate or gradient flow); a loss that falls almost to 0 at once "
                f"means the labels leak into the input.",
    "lr-schedule": f"The learning rate your train() set at every optimizer step (traced on a tiny stand-in model, "
                   f"with your defaults for lr and warmup). The lesson warms up linearly from "
                   f"{num(_LR_PEAK / _LR_WARMUP)} to {num(_LR_PEAK)} over {_LR_WARMUP} steps, then stays flat.",
    "positional": "The table your positional encoding adds to a zero input (rows: positions, columns: the model's "
                  "dimensions; the figure says how many). Correct is sin in even and cos in odd dimensions, with frequency falling from left "
                  "to right.",
    "causal": "Which decoder outputs change when one decoder input token changes (the lesson's leakage test, for "
              "every position). Correct is lower-triangular: output i may depend on inputs 0..i only. A cell above "
              "the diagonal is a future leak: training looks excellent and generation fails.",
    "rowmax": f"For each row of the first attention layer of the untrained model, the largest attention weight. With "
              f"the 1/sqrt(d_k) scaling correct code's mean is {BY_ID['attn-saturation'].correct}; without it softmax "
              f"saturates and the mean is {value('attn-saturation', 'unscaled')}.",
    "overfit": f"A fresh model (dropout 0) trained on one fixed batch of {value('overfit', 'batch')} with Adam at lr "
               f"{num(value('overfit', 'lr'))}. A correct model memorises it: {BY_ID['overfit'].text} within "
               f"{value('overfit', 'max_steps')} steps (correct code: in {value('overfit', 'correct_steps')} steps); "
               f"training stops there. A model that cannot has a wiring bug.",
    "block-weights": "The self-attention weights of each head of your TransformerBlock on one input, without and "
                     "with the causal mask. With the mask, everything above the diagonal must be 0.",
}
