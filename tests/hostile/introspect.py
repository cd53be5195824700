# hostile: looks around - limits, environment, working folder, sys.path, open descriptors, stdin
# base: contract-missing
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import json
import os
import resource
import sys


class _Look:
    print("LIMITS " + json.dumps({n: resource.getrlimit(getattr(resource, n))
                                  for n in ("RLIMIT_CORE", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NOFILE")}))
    print("ENV " + json.dumps(dict(os.environ)))
    print("CWD " + json.dumps([os.getcwd(), sorted(os.listdir("."))]))
    print("SYSPATH " + json.dumps(sys.path))
    print("ARGV " + json.dumps(sys.argv))
    print("FDS " + json.dumps(sorted(int(f) for f in os.listdir("/dev/fd"))))
    print("STDIN " + json.dumps(sys.stdin.read()))
