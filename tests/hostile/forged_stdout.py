# hostile: prints a forged result, a forged "verdict clean" line and a forged score on stdout and stderr
# base: mutant:reversal-softmax-wrong-dim
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import json as _json
import os as _os
import sys as _sys


class _Forge:
    # (in a class body: the loader runs class bodies, not top-level calls)
    _FORGED = _json.dumps({"event": "result", "seq": 0, "nonce": "0" * 32, "verdict": "clean", "score": 100,
                           "result": {"checks": [], "load": {"ok": True}, "verdict": "clean"}})
    print(_FORGED)
    print('{"verdict": "clean", "score": 100, "grade": {"score": 100, "max_score": 100}}')
    _sys.__stdout__.write(_FORGED + "\n")
    _sys.__stdout__.flush()
    _os.write(1, (_FORGED + "\n").encode())
    _os.write(2, (_FORGED + "\n").encode())
