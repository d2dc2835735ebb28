"""Finding and stopping exactly the processes a cluster started, by PID.

Several test sessions share this machine, each with its own cluster, so nothing here
matches processes by name. A daemon is ours only if its PID, its start time (guards
against PID reuse), its executable and its ``SLURM_CONF`` all match what we recorded.
Stragglers (a wedged ``slurmstepd``, tasks of a dead slurmd) are found by the network
namespace they live in, which belongs to exactly one cluster.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable
from typing import Any, Final

from tfslurm.value import Value


class ProcessRecord(Value):
    """A process we started: enough to recognise it later, even from another process.

    ``name`` is "slurmctld" or "slurmd" (Debian's binaries are called slurmctld-wlm and
    slurmd-wlm); ``start_time`` is field 22 of /proc/PID/stat, in clock ticks since boot.
    """

    __slots__ = ("name", "node", "pid", "start_time")
    __match_args__ = ("name", "pid", "start_time", "node")

    def __init__(self, name: str, pid: int, start_time: int, node: str | None = None) -> None:
        self.name: Final = name
        self.pid: Final = pid
        self.start_time: Final = start_time
        self.node: Final = node

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "pid": self.pid, "start_time": self.start_time, "node": self.node}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessRecord:
        return cls(str(data["name"]), int(data["pid"]), int(data["start_time"]), data.get("node"))


def start_time(pid: int) -> int | None:
    """Start time of PID in clock ticks, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) may contain spaces and parentheses: split after the last ')'
    rest = stat[stat.rfind(b")") + 2 :].split()
    return int(rest[19])


def is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"Z"


def exe_name(pid: int) -> str | None:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return None


def environ_has(pid: int, entry: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return entry.encode() in f.read().split(b"\0")
    except OSError:
        return False


def is_ours(record: ProcessRecord, slurm_conf: str) -> bool:
    """True if ``record`` still names the live daemon we started for ``slurm_conf``."""
    if start_time(record.pid) != record.start_time or is_zombie(record.pid):
        return False
    if exe_name(record.pid) not in (record.name, f"{record.name}-wlm"):
        return False
    return environ_has(record.pid, f"SLURM_CONF={slurm_conf}")


def alive(pid: int) -> bool:
    return start_time(pid) is not None and not is_zombie(pid)


def pids_in_netns(inodes: Iterable[int]) -> list[int]:
    """Every process whose network namespace is one of ``inodes`` (never this process)."""
    wanted = set(inodes)
    found: list[int] = []
    if not wanted:
        return found
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            if os.stat(f"/proc/{entry}/ns/net").st_ino in wanted:
                found.append(int(entry))
        except OSError:
            continue
    return found


def descendants(roots: Iterable[int]) -> list[tuple[int, int]]:
    """(pid, start time) of every descendant of ``roots`` (e.g. slurmctld's slurmscriptd)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        parent[int(entry)] = int(stat[stat.rfind(b")") + 2 :].split()[1])
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    found: list[tuple[int, int]] = []
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            started = start_time(child)
            if started is not None:
                found.append((child, started))
                todo.append(child)
    return found


def terminate(pids: Iterable[int], grace: float, reap: Callable[[int], object] | None = None) -> list[int]:
    """SIGTERM ``pids``, wait up to ``grace`` s, SIGKILL the rest. Returns the killed ones.

    ``reap(pid)`` is called while waiting so our own children do not linger as zombies.
    """
    pending = [p for p in pids if alive(p)]
    for pid in pending:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pending and time.monotonic() < deadline:
        time.sleep(0.05)
        if reap:
            for pid in pending:
                reap(pid)
        pending = [p for p in pending if alive(p)]
    for pid in pending:
        _signal(pid, signal.SIGKILL)
    if pending:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(alive(p) for p in pending):
            if reap:
                for pid in pending:
                    reap(pid)
            time.sleep(0.05)
    return pending


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
