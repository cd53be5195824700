# hostile: forward() returns a Tensor subclass that lies about its values (every torch call on it
# gives 0; abs, max and item are overridden too)
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
# base: reference


class _Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return torch.zeros(())

    def abs(self):
        return torch.zeros(())

    def max(self, *args, **kwargs):
        return torch.zeros(())

    def item(self):
        return 0.0


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        logits, maps = super().forward(src, tgt)
        return logits.as_subclass(_Liar), maps
