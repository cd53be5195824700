# hostile: writes garbage and a forged result to every open descriptor, then lets the real check go on
# base: broken-forward
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import json as _json
import os as _os


class _Forge:
    # (in a class body: the loader runs class bodies, not top-level calls)
    _FORGED = _json.dumps({"event": "result", "seq": 1, "nonce": "f" * 32,
                           "result": {"checks": [], "load": {"ok": True}, "assignment": "reversal"}})
    for _fd in sorted(int(_n) for _n in _os.listdir("/dev/fd")):
        if _fd > 2:
            try:
                _os.write(_fd, b"\x00garbage[[[\n" + (_FORGED + "\n").encode())
            except OSError:
                pass
