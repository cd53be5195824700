# hostile: allocates 160 GB inside forward()
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        big = torch.empty(200_000, 200_000)
        return super().forward(src, tgt) + (big,)
