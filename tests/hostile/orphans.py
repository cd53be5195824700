# hostile: starts processes meant to outlive the check: a new session, one with an empty
# environment, and a double fork whose grandchild calls setsid
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
# base: contract-missing
import os
import subprocess
import time


class _Spawn:
    a = subprocess.Popen(["sleep", "{{MARK}}1"], start_new_session=True)
    b = subprocess.Popen(["sleep", "{{MARK}}2"], start_new_session=True, env={})
    if os.fork() == 0:
        if os.fork() == 0:
            os.setsid()
            os.execvp("sleep", ["sleep", "{{MARK}}3"])
        os._exit(0)
    time.sleep(0.5)
