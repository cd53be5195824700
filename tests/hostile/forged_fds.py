# hostile: writes forged JSON result lines to file descriptors 3..20, hoping one is the result channel
# base: contract-missing
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import json
import os


class _Forge:
    # (in a class body: the loader runs class bodies, not top-level calls)
    _FORGED = json.dumps({"event": "result", "result": {"checks": [], "load": {"ok": True}}, "verdict": "clean"})
    for _fd in range(3, 21):
        try:
            os.write(_fd, (_FORGED + "\n").encode())
        except OSError:
            pass
