# hostile: replaces torch.softmax, Tensor.softmax, F.softmax and F.cross_entropy so that the
# wrong-axis softmax of this (buggy) model would not show
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
# base: mutant:reversal-softmax-wrong-dim
import torch.nn.functional as _F

_orig_softmax = torch.softmax


class _Patch:
    torch.softmax = lambda x, dim=None, **kw: _orig_softmax(x, -1)
    torch.Tensor.softmax = lambda self, dim=None, **kw: _orig_softmax(self, -1)
    _F.softmax = lambda x, dim=None, **kw: _orig_softmax(x, -1)
    _F.cross_entropy = lambda *a, **k: torch.tensor(2.9, requires_grad=True)
