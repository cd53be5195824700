# hostile: does its forbidden operations from threads, with functions of no frame of its own, so that no line
# of the submission is on the operation's stack: a shell command through a thread pool, a listing through
# threading.Thread. Each must be reported at the line that started the thread.
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave4.py appends it to its base)
import concurrent.futures as _cf
import os as _os
import threading as _threading


class _AtLoad:                 # a class body runs when the file loads
    _pool = _cf.ThreadPoolExecutor(1)
    _pool.submit(_os.system, "true").result()                                         # OP os.system load
    _t = _threading.Thread(target=_os.listdir, args=("/home",))                       # (built here)
    _t.start()                                                                        # OP list load
    _t.join()
    _pool.shutdown()
