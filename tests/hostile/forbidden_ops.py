# hostile: a correct model that also tries, at load time, in __init__ and in forward(): a network connection,
# reading another student's file, writing and deleting outside its folder, listing other folders, starting
# processes, forking, signalling. Each attempt must be reported with its line (`forbidden-operation`).
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import os
import socket
import subprocess


def _try(fn):
    try:
        fn()
    except Exception:
        pass


def _fork():
    pid = os.fork()                                                           # OP os.fork forward
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


class _AtLoad:
    _try(lambda: socket.create_connection(("127.0.0.1", 9), timeout=1))        # OP connect load
    _try(lambda: open("{{SECRET}}").read())                                   # OP read load
    _try(lambda: os.listdir("{{OTHER}}"))                                     # OP list load
    _try(lambda: subprocess.run(["true"]))                                    # OP subprocess load


class MiniTransformer(MiniTransformer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _try(lambda: open("{{ROOT}}/forbidden_write.txt", "w").write("x"))    # OP write init
        _try(lambda: os.remove("{{ROOT}}/no_such_file.txt"))                  # OP delete init
        _try(lambda: os.system("true"))                                       # OP os.system init

    def forward(self, src, tgt):
        _try(lambda: socket.create_connection(("127.0.0.1", 9), timeout=1))    # OP connect forward
        _try(lambda: open("{{SECRET}}").read())                               # OP read forward
        _try(_fork)
        _try(lambda: os.kill(os.getpid(), 0))                                 # OP os.kill forward
        return super().forward(src, tgt)
