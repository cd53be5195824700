# hostile: finds every open descriptor, writes a forged "all checks pass" result to each, then exits at once
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import json as _json
import os as _os


class _Forge:
    # (in a class body: the loader runs class bodies, not top-level calls)
    _FORGED = [_json.dumps({"event": "phase", "name": "contract"}),
               _json.dumps({"event": "result", "seq": 1, "nonce": "f" * 32,
                            "result": {"checks": [{"id": "contract", "status": "pass"}], "load": {"ok": True},
                                       "assignment": "reversal"}})]
    for _fd in sorted(int(_n) for _n in _os.listdir("/dev/fd")):
        if _fd > 2:
            for _line in _FORGED:
                try:
                    _os.write(_fd, (_line + "\n").encode())
                except OSError:
                    pass
    _os._exit(0)
