# hostile: forward() returns logits of the wrong shape (5 classes instead of 13)
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        logits, maps = super().forward(src, tgt)
        return logits[..., :5], maps
