# hostile: opens network connections (a listener on the grader's machine, and the internet)
# base: contract-missing
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import socket


class _Net:
    for _addr in [("127.0.0.1", {{PORT}}), ("1.1.1.1", 53)]:
        try:
            _s = socket.create_connection(_addr, timeout=3)
            _s.sendall(b"exfiltrated")
            print("CONNECT-OK", _addr)
        except Exception as _e:
            print("CONNECT-REFUSED", _addr, type(_e).__name__)
