"""What a run's processes hold, measured from outside through /proc: memory an address-space limit does not see,
and disk a walk of the run's folder does not see.

* Memory held as files: a memfd (`memfd_create`), a file in /dev/shm or in the run's private /tmp, /var/tmp and
  /dev/shm (tmpfs), System V shared memory. None of it is address space until mapped, so RLIMIT_AS let a run
  hold 42 memfds of 60 MB under a 2 GB limit. Counted here: each such object a process holds open
  (/proc/PID/fd) or has mapped (/proc/PID/maps, statted through /proc/PID/map_files), once, by its allocated
  blocks; the used size of each private tmpfs of the run (/proc/PID/root/tmp, ...: files written and closed
  there are memory too); and where a mapping cannot be statted, the process's RssShmem.
* Disk held by open files: a file the run unlinked while holding it open takes its blocks until the last
  descriptor closes, and no walk of a folder finds it (1.2 GB held while the walk saw 0 MB). Counted here: every
  regular file a process holds open whose link count is 0, by its allocated blocks.

`measure(pids)` reads every process once: a few milliseconds for a run's two torch processes, most of it their
mappings, which `Sampler` reads every fourth period unless a process has shared memory resident."""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass

SCRATCH = ("tmp", "var/tmp", "dev/shm")
_MARKS = (b"/memfd:", b"/dev/shm/", b"/SYSV", b"(deleted)")
_host: dict = {}


@dataclass
class Held:
    anon_kb: int = 0           # private memory (RssAnon), summed over the processes
    file_kb: int = 0           # mapped file pages (RssFile): what VmRSS adds (the CUDA watchdog's basis)
    shmem_kb: int = 0          # RssShmem of processes whose shared mappings could not be statted
    objects: int = 0           # bytes of memfd / shared-memory / tmpfs files held open or mapped (each once)
    scratch: int = 0           # bytes used in the run's private tmpfs (its own /tmp, /var/tmp, /dev/shm)
    disk: int = 0              # bytes of unlinked files held open on disk

    def memory_mb(self, resident: bool = False) -> float:
        kb = self.anon_kb + self.shmem_kb + (self.file_kb if resident else 0)
        return (kb * 1024 + self.objects + self.scratch) / 2 ** 20

    def files_mb(self) -> float:
        """The part of memory_mb held as files (memfd, shared memory, tmpfs)."""
        return (self.objects + self.scratch + self.shmem_kb * 1024) / 2 ** 20


def host_memory_devs() -> frozenset:
    """Devices whose files are memory as this process sees them: the kernel's internal shmem mount (memfd,
    System V segments) and the machine's /dev/shm. Other folders of ours (/tmp) may well be disk."""
    if "devs" not in _host:
        devs = set()
        try:
            fd = os.memfd_create("mtxdiag-probe")
            try:
                devs.add(os.fstat(fd).st_dev)
            finally:
                os.close(fd)
        except (OSError, AttributeError):
            pass
        try:
            devs.add(os.stat("/dev/shm").st_dev)
        except OSError:
            pass
        _host["devs"] = frozenset(devs)
        own = set()
        for top in SCRATCH:
            try:
                own.add(os.stat("/" + top).st_dev)
            except OSError:
                pass
        _host["own"] = frozenset(own)
    return _host["devs"]


def _status_kb(pid: int) -> tuple[int, int, int]:
    anon = file = shmem = 0
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"RssAnon:"):
                    anon = int(line.split()[1])
                elif line.startswith(b"RssFile:"):
                    file = int(line.split()[1])
                elif line.startswith(b"RssShmem:"):
                    shmem = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return anon, file, shmem


def _scratch(pid: int, seen: dict) -> None:
    """The run's private tmpfs, seen through its root (not ours: those are the machine's, or not memory)."""
    own = _host.get("own", frozenset())
    for top in SCRATCH:
        path = f"/proc/{pid}/root/{top}"
        try:
            dev = os.stat(path).st_dev
            if dev in own or dev in seen:
                continue
            v = os.statvfs(path)
        except OSError:
            continue
        seen[dev] = (v.f_blocks - v.f_bfree) * v.f_frsize


def measure(pids, maps: bool = True) -> Held:
    """One sample of what these processes hold (gone or unreadable processes count nothing). maps=False: a
    process's mappings are read only when it has shared memory resident (RssShmem); the most costly read."""
    memory_devs = host_memory_devs()
    h, scratch, objects = Held(), {}, {}
    for pid in pids:
        anon, file, shmem = _status_kb(pid)
        h.anon_kb += anon
        h.file_kb += file
        _scratch(pid, scratch)
        mem = memory_devs | scratch.keys()
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            names = []
        for n in names:
            where = f"/proc/{pid}/fd/{n}"
            try:
                link = os.readlink(where)
                if not link.startswith("/"):          # pipes, sockets, anonymous inodes
                    continue
                st = os.stat(where)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            key = (st.st_dev, st.st_ino)
            if st.st_dev in mem or link.startswith("/memfd:"):
                objects[key] = ("mem", st.st_blocks * 512, st.st_dev)
            elif st.st_nlink == 0:
                objects[key] = ("disk", st.st_blocks * 512, st.st_dev)
        if (maps or shmem) and not _mapped(pid, objects, mem) and shmem:
            h.shmem_kb += shmem
    h.scratch = sum(scratch.values())
    for kind, size, dev in objects.values():
        if kind == "disk":
            h.disk += size
        elif dev not in scratch:                      # a tmpfs's files are in its used size already
            h.objects += size
    return h


def _mapped(pid: int, objects: dict, mem) -> bool:
    """Shared memory this process has mapped, added to `objects` by inode; False when a mapping could not be
    statted (then the caller counts the process's RssShmem instead)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            data = f.read()
    except OSError:
        return False
    ok = True
    if not any(m in data for m in _MARKS):
        return ok
    for line in data.splitlines():
        if not any(m in line for m in _MARKS):
            continue
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        try:
            st = os.stat(f"/proc/{pid}/map_files/{parts[0].decode()}")
        except OSError:
            ok = False
            continue
        if stat.S_ISREG(st.st_mode) and (st.st_dev in mem or parts[5].startswith(b"/memfd:")):
            objects.setdefault((st.st_dev, st.st_ino), ("mem", st.st_blocks * 512, st.st_dev))
    return ok


class Sampler:
    """One measurement of a run's processes per period, shared by its memory and disk watches. Every
    `maps_every`-th reads all mappings (a memfd mapped and never touched, its descriptor closed, shows no
    RssShmem); the others only those of processes with shared memory resident."""

    def __init__(self, pids, period_s: float = 0.0, maps_every: int = 4):
        self.pids, self.period_s, self.maps_every, self.n = pids, period_s, max(1, maps_every), 0
        self.last, self.members, self._at = Held(), set(), None

    def sample(self) -> Held:
        """What the run holds now (once per period); `members` then holds the processes it read."""
        import time
        now = time.monotonic()
        if self._at is None or now - self._at >= self.period_s:
            self.members = set(self.pids())
            self.last, self._at = measure(self.members, maps=self.n % self.maps_every == 0), now
            self.n += 1
        return self.last


def descendants(root: int) -> set[int] | None:
    """`root` and every process below it, read from the tree's own /proc/PID/task/TID/children entries (a few
    reads, not the whole process table: what a watch samples every period); None where the kernel lacks them.
    Inside bubblewrap and below a warm worker (a subreaper) an orphan stays below the root."""
    found: set[int] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        found.add(pid)
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo.extend(int(x) for x in f.read().split())
            except FileNotFoundError:
                if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                    continue               # the thread ended meanwhile
                return None                # no children files on this kernel
            except (OSError, ValueError):
                continue
    return found
