# hostile: forward() returns a string instead of logits
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        return "logits", None
