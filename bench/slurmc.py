"""Slurm's own hostlist C code, called in-process through ctypes: an anchor for the bench.

``expand(text)``: ``slurm_hostlist_create`` then ``slurm_hostlist_deranged_string_malloc``
(every host, comma-separated, in one C call), split into a list as tfslurm returns one.
``compress(hosts, sort)``: ``slurm_hostlist_create(NULL)``, ``slurm_hostlist_push_host``
per host, ``slurm_hostlist_sort`` when sorting (what ``scontrol show hostlistsorted``
does; ``slurm_hostlist_uniq`` would also drop repeats), then
``slurm_hostlist_ranged_string_malloc``. One ctypes call per pushed host (and encoding
its name) is part of the figure, as it is for any Python caller; libslurm has no call that
takes a list of names without parsing them as text (``slurm_hostlist_push`` parses, in
quadratic time for a long bracket-free list). :meth:`SlurmC.call_floor` times that call
overhead alone, so the table can say how much of the anchor it is.

Slurm (22.05) ends the whole process (``fatal: Too many ranges``) on a bracket of more
than 262,144 ranges: :func:`unsafe` tells such input, which callers must not pass. Slurm
also writes a run of more than 65,536 hosts as one range (``n[0-99999]``), which its own
parser then refuses; tfslurm splits it (``n[0-65535,65536-99999]``): :func:`joined`
rewrites tfslurm's answer Slurm's way for comparison.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re

MAX_RANGES = 256 * 1024  # Slurm's MAX_RANGES in hostlist.c: more is fatal
CANDIDATES = (
    "libslurm.so",
    "libslurm.so.38",
    "/usr/lib/x86_64-linux-gnu/libslurm.so",
    "/usr/lib/x86_64-linux-gnu/slurm-wlm/libslurmfull.so",
)
_BRACKET = re.compile(r"\[([^\[\]]*)\]")
SPLIT = 65_536  # hosts per range where tfslurm splits a longer run (Slurm's MAX_RANGE)


class SlurmC:
    """The hostlist calls of a loaded libslurm (``path``; ``api``: its API version)."""

    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path)
        self.path = path
        handle, text = ctypes.c_void_p, ctypes.c_char_p
        lib.slurm_hostlist_create.restype = handle
        lib.slurm_hostlist_create.argtypes = [text]
        lib.slurm_hostlist_destroy.argtypes = [handle]
        lib.slurm_hostlist_push_host.argtypes = [handle, text]
        lib.slurm_hostlist_push_host.restype = ctypes.c_int
        lib.slurm_hostlist_sort.argtypes = [handle]
        lib.slurm_hostlist_count.argtypes = [handle]
        lib.slurm_hostlist_count.restype = ctypes.c_int
        for name in ("slurm_hostlist_deranged_string_malloc", "slurm_hostlist_ranged_string_malloc"):
            getattr(lib, name).argtypes = [handle]
            getattr(lib, name).restype = ctypes.c_void_p  # malloc()ed: freed with free()
        self.lib = lib
        self.libc = ctypes.CDLL(None)
        self.libc.free.argtypes = [ctypes.c_void_p]
        self.api = "?"
        if hasattr(lib, "slurm_api_version"):  # SLURM_API_VERSION (38 for 22.05)
            lib.slurm_api_version.restype = ctypes.c_long
            self.api = str(lib.slurm_api_version() >> 16 & 0xFF)

    def _take(self, pointer: int | None) -> str:
        if not pointer:
            raise RuntimeError("libslurm returned NULL")
        try:
            return ctypes.string_at(pointer).decode()
        finally:
            self.libc.free(pointer)

    def expand(self, text: str) -> list[str]:
        """Every host of ``text`` (never pass :func:`unsafe` text)."""
        hostlist = self.lib.slurm_hostlist_create(text.encode())
        if not hostlist:
            raise ValueError(f"libslurm refused {text[:60]!r}")
        try:
            return self._take(self.lib.slurm_hostlist_deranged_string_malloc(hostlist)).split(",")
        finally:
            self.lib.slurm_hostlist_destroy(hostlist)

    def compress(self, hosts: list[str], sort: bool = False) -> str:
        """Slurm's ranged string of ``hosts`` (sorted first with ``sort``)."""
        hostlist = self.lib.slurm_hostlist_create(None)
        push = self.lib.slurm_hostlist_push_host
        try:
            for host in hosts:
                push(hostlist, host.encode())
            if sort:
                self.lib.slurm_hostlist_sort(hostlist)
            return self._take(self.lib.slurm_hostlist_ranged_string_malloc(hostlist))
        finally:
            self.lib.slurm_hostlist_destroy(hostlist)

    def call_floor(self, hosts: list[str]) -> None:
        """What :meth:`compress` pays in Python per host, without Slurm's work: encode the
        name and make one ctypes call (``slurm_hostlist_count`` of an empty list)."""
        hostlist = self.lib.slurm_hostlist_create(None)
        count = self.lib.slurm_hostlist_count
        try:
            for host in hosts:
                host.encode()
                count(hostlist)
        finally:
            self.lib.slurm_hostlist_destroy(hostlist)


def load() -> SlurmC | None:
    """libslurm's hostlist calls, or None where no library with them loads."""
    for candidate in CANDIDATES:
        path = ctypes.util.find_library("slurm") if candidate == "libslurm.so" else candidate
        if not path or (os.sep in path and not os.path.exists(path)):
            continue
        try:
            return SlurmC(path)
        except (OSError, AttributeError):
            continue
    return None


def unsafe(text: str) -> bool:
    """Whether Slurm's parser would end the process on ``text`` (too many ranges)."""
    return any(body.count(",") >= MAX_RANGES for body in _BRACKET.findall(text))


def joined(text: str) -> str:
    """``text`` with tfslurm's split runs (``0-65535,65536-99999``) joined as Slurm writes them."""
    return _BRACKET.sub(lambda match: f"[{_join_body(match.group(1))}]", text)


def _join_body(body: str) -> str:
    out: list[tuple[str, str]] = []
    for item in body.split(","):
        low, _, high = item.partition("-")
        high = high or low
        if out:
            first, last = out[-1]
            whole = (int(last) - int(first) + 1) % SPLIT == 0
            same_width = len(low) == len(last) or not (low.startswith("0") or last.startswith("0"))
            if whole and int(low) == int(last) + 1 and same_width:
                out[-1] = (first, high)
                continue
        out.append((low, high))
    return ",".join(low if low == high else f"{low}-{high}" for low, high in out)
