# hostile: an infinite loop while the file's definitions run
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)


class _Spin:
    while True:
        pass
