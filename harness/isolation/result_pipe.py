"""The parent's reading of the child's pipes: stdout and stderr drained in threads up to a bound, and the
private result channel, whose lines count only with the run's key and in sequence (see runner.py)."""
from __future__ import annotations

import hmac
import json
import os
import re
import threading
import time

from ..limits import RESULT_MB
from ..protocol import MSG_INTEGRITY, MSG_PHASE, MSG_RESULT

MAX_RESULT_BYTES = int(RESULT_MB * 1_000_000)      # read from the result channel; past it, the student's error
MAX_OUTPUT_BYTES = 256 * 1024                      # kept of each output pipe (every byte is counted)

_PHASE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")   # probe ids; a pack's are "Component.probe"


class Drain(threading.Thread):
    """Read a pipe to the end, keeping at most `limit` bytes; optionally hand complete lines to `on_line`."""

    def __init__(self, fd, limit, on_line=None, on_end=None):
        super().__init__(daemon=True)
        self.fd, self.limit, self.on_line, self.on_end = fd, limit, on_line, on_end
        self.buf, self.size, self.dropped = bytearray(), 0, 0
        self.size_seen = 0           # every byte read, kept or not

    def run(self):
        pending, overflow = b"", False
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.size_seen += len(chunk)
            if self.on_line is None:
                room = self.limit - len(self.buf)
                if room > 0:
                    self.buf += chunk[:room]
                self.dropped += max(0, len(chunk) - max(room, 0))
                continue
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                self.on_line(line)
            if len(pending) > self.limit:
                pending, overflow = b"", True
        os.close(self.fd)
        if self.on_end:
            self.on_end(pending, overflow)

    def text(self):
        t = self.buf.decode("utf-8", "replace")
        return t + (f"\n[... {self.dropped:,} more bytes not kept]" if self.dropped else "")


class ResultChannel:
    """The parent's reading of the private result pipe.

    Authentic lines are JSON objects with the run's key and consecutive sequence numbers: phases, then one
    result. Everything else is counted (`rejected`) or breaks the channel (`broken`): both are tampering."""

    def __init__(self, nonce: str, t0: float, on_event=None, max_bytes: int | None = MAX_RESULT_BYTES):
        self.nonce, self.t0, self.on_event = nonce, t0, on_event
        self.max_bytes, self.size = max_bytes, 0
        self.oversized = False       # more than max_bytes on the channel: nothing past them is read
        self.seq, self.result, self.done = 0, None, False
        self.phase, self.phases = None, []
        self.rejected, self.broken = 0, None
        self.live: list[str] = []    # integrity events the child sent as they happened (audit.py: introspection)

    def on_line(self, line: bytes):
        self.size += len(line) + 1
        if self.oversized or (self.max_bytes is not None and self.size > self.max_bytes):
            self.oversized = True    # not parsed: a result this large slows the trusted process down
            return
        if not line.strip():
            self.rejected += 1
            return
        try:
            msg = json.loads(line)
            key = msg.get("nonce") if isinstance(msg, dict) else None
            authentic = isinstance(key, str) and hmac.compare_digest(key.encode("utf-8", "replace"),
                                                                     self.nonce.encode())
        except (ValueError, RecursionError, TypeError):
            authentic = False
        if not authentic:
            self.rejected += 1
            return
        if self.done or msg.get("seq") != self.seq:
            self.broken = self.broken or "messages with the run's key arrived out of order or after the result"
            return
        self.seq += 1
        ev, name = msg.get("event"), msg.get("name")
        if ev == MSG_PHASE and isinstance(name, str) and _PHASE.fullmatch(name):
            self.phase = name
            self.phases.append((name, round(time.monotonic() - self.t0, 2)))
            if self.on_event:
                try:
                    self.on_event(name)
                except Exception:
                    pass
        elif ev == MSG_RESULT:
            self.result, self.done = msg.get("result"), True
        elif ev == MSG_INTEGRITY and isinstance(msg.get("what"), str):
            if len(self.live) < 20:
                self.live.append(msg["what"][:300])
        else:
            self.broken = self.broken or "an unknown message with the run's key"

    def on_end(self, pending: bytes, overflow: bool):
        if overflow and self.max_bytes is not None:
            self.oversized = True   # one line past the bound (the Drain's limit): the result, or a forged write
        elif pending.strip() or overflow:
            self.rejected += 1      # an unterminated or oversized write: never the grader's

    def oversize_reason(self) -> str:
        """Why the result was not read (the student's error: no check of correct code comes near the bound)."""
        return (f"sent more than {(self.max_bytes or 0) / 1e6:.0f} MB on the result channel (the most the grader "
                f"reads from a check; a correct model's result is well under 1 MB): the submission's code made the "
                f"result this large, and nothing past the bound was read")

    def problems(self) -> list[str]:
        out = []
        if self.rejected:
            out.append(f"{self.rejected} line(s) written to the grader's private result channel did not come from "
                       "the grader (forged or garbage output)")
        if self.broken:
            out.append(self.broken)
        return out


def output_flood(out: Drain, err: Drain, result, limit_mb: float, server: Drain | None = None) -> dict | None:
    """How much the run printed, None when within `limit_mb`: through print() (the child counts what it did not
    keep), straight to descriptors 1 and 2 (counted here), and a split run's model server's stdout and stderr
    (counted here on their own pipe: the student's code runs there, and nothing it holds counts it)."""
    child = result.get("output_chars") if isinstance(result, dict) else None
    child = child if isinstance(child, int) and 0 <= child < 2 ** 53 else 0
    fds = out.size_seen + err.size_seen
    srv = server.size_seen if server is not None else 0
    total = child + fds + srv
    if total <= limit_mb * 1e6:
        return None
    return dict({"bytes": total, "through_print": child, "to_descriptors": fds, "limit_mb": limit_mb},
                **({"model_server": srv} if server is not None else {}))


def flood_detail(flood: dict) -> str:
    """What the instructor reads of an output flood (output_flood's numbers); split, the model server's first."""
    def mb(key: str) -> str:
        return f"{(flood.get(key) or 0) / 1e6:.1f} MB"
    parts = [f"{mb('through_print')} through print()", f"{mb('to_descriptors')} straight to the output descriptors"]
    if "model_server" in flood:     # the prober's own output (the grader's) is named only when there is some
        parts = [f"{mb('model_server')} from the model server's stdout and stderr, where the code runs"] + \
            [p for p, k in zip(parts, ("through_print", "to_descriptors")) if flood.get(k)]
    return f"the code printed {mb('bytes')} ({', '.join(parts)}); only the first {MAX_OUTPUT_BYTES // 1024} KB per " \
           f"stream are kept"
