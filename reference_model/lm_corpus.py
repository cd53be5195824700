"""A tiny character-level corpus for the brief lm training (harness/child/probes/lm/train_brief.py), written for
mtxdiag. A .py module so that the sandbox's snapshot of reference_model carries it. Token k is the k-th
character of VOCAB."""

TEXT = (
    'a small model learns to guess the next letter. at first every letter is as likely as any other, '
    'so the loss starts near the log of the number of letters. then the model sees that a space '
    'follows a word, that the letter after a q is a u, and that a period ends a sentence. the '
    'attention layers look back at the letters before the one to guess, and never at the ones after '
    'it. the optimizer moves every weight a little against its gradient, the schedule warms the step '
    'size up and then lets it fall along a cosine, and the clipping keeps one bad batch from '
    'throwing the weights far away. when all of this is right, the loss falls quickly on one batch '
    'and steadily on the whole text. when one piece is wrong, the curve stalls, wanders or turns '
    'into nan, and the step where it leaves the reference says which piece to read again. the cat '
    'sat on the mat. the dog sat on the log. the cat saw the dog and the dog saw the cat. one two '
    'three four five six seven eight nine ten. ten nine eight seven six five four three two one.  '
).rstrip(" ")
VOCAB = "".join(sorted(set(TEXT)))


def tokens() -> list[int]:
    return [VOCAB.index(c) for c in TEXT]
