# hostile: imports a module that is not installed
# base: none
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import torch
import mtxdiag_no_such_module_xyz  # noqa: F401


class MiniTransformer(torch.nn.Module):
    pass
