# hostile: allocates far more memory than the limit while loading (1 GB blocks until refused)
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)


class _Hog:
    blocks = []
    while True:
        blocks.append(torch.empty(2 ** 28))
