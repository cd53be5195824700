# hostile: fills its run folder with files each just under the per-file cap (RLIMIT_FSIZE), so only their sum
# is over: 12 x 48 MB into the working folder, then waits 60 s; the parent's disk watch must end it first
# base: reference
# flake8: noqa  (a fragment: the test appends it to its base)
import os as _os
import time as _time


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        chunk = b"\1" * (1 << 20)
        for i in range(12):
            with open(f"fill_{i}.bin", "wb") as f:
                for _ in range(48):
                    f.write(chunk)
            print(f"FILLED {i + 1}", flush=True)
        _time.sleep(60)
        return super().forward(src, tgt)
