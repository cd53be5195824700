# hostile: a syntax error
# base: none
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import torch


def forward(x:
    return x
