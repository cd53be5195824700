# hostile: patches the comparisons the checks use (allclose, isfinite, ==, abs, max) at load time and
# again inside every forward(), so that this model's missing causal mask would not show
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
# base: mutant:reversal-causal-mask-missing


def _fake_max(self, *args, **kwargs):
    if args or kwargs:
        shape = self.shape[:-1]
        return torch.return_types.max((torch.zeros(shape), torch.zeros(shape, dtype=torch.long)))
    return torch.zeros(())


def _install():
    torch.allclose = lambda *a, **k: True
    torch.isfinite = lambda x: torch.ones_like(x, dtype=torch.bool)
    torch.Tensor.__eq__ = lambda self, other: torch.ones(self.shape, dtype=torch.bool)
    torch.Tensor.abs = lambda self: torch.zeros(self.shape)
    torch.Tensor.max = _fake_max


class _Patch:
    _install()


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        _install()
        return super().forward(src, tgt)
