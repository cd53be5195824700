# hostile: forward() returns NaN logits
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        logits, maps = super().forward(src, tgt)
        return logits * float("nan"), maps
