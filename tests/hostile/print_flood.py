# hostile: prints 50 MB through print(), sys.__stdout__, and straight to file descriptors 1 and 2
# base: contract-missing
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import os
import sys


class _Flood:
    print("x" * 50_000_000)
    sys.__stdout__.write("y" * 50_000_000)
    sys.__stdout__.flush()
    os.write(1, b"z" * 50_000_000)
    os.write(2, b"e" * 50_000_000)
