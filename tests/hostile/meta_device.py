# hostile: forward() returns logits on the 'meta' device (a shape without values)
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        logits, maps = super().forward(src, tgt)
        return logits.to("meta"), maps
