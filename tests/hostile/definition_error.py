# hostile: an exception while the file's definitions run (a class body runs at import)
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)


class _Broken:
    raise ValueError("boom while the class body runs")
