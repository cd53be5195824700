# hostile: the same escaping processes, then the check hangs until the time limit kills it
# base: contract-missing
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import os
import subprocess
import time


class _Spawn:
    a = subprocess.Popen(["sleep", "{{MARK}}4"], start_new_session=True)
    b = subprocess.Popen(["sleep", "{{MARK}}5"], start_new_session=True, env={})
    if os.fork() == 0:
        if os.fork() == 0:
            os.setsid()
            os.execvp("sleep", ["sleep", "{{MARK}}6"])
        os._exit(0)
    while True:
        time.sleep(1)
