"""Slurm hostfiles (``SLURM_HOSTFILE``): the hosts of an arbitrary-distribution step, in
task order, read as srun reads them.

A hostfile has a syntax of its own around hostlists: ``#`` comments, words separated by
commas or any whitespace outside brackets (``\\r`` of a CRLF file, ``\\v``, ``\\f`` and
non-ASCII spaces included, which a hostlist would keep in a host name), and ``HOSTLIST*N``
repeats. Each word is a hostlist read with :func:`tfslurm.hostlist.expand`; the words are
found by :func:`_words`, not by the hostlist parser's item splitter, because that one
separates items at ``,``, ``' '`` and ``\\t`` only. Reading the file refuses what would
hang a task (a FIFO, a device) and bounds memory (:data:`MAX_HOSTFILE_BYTES`,
:data:`tfslurm.step.MAX_TASKS`). It is a module of its own, apart from ``layout`` (which
builds the arbitrary layout from its hosts, and imports this module only for such a step),
because it is a file format and a file read, not a layout.
"""

from __future__ import annotations

import os
import stat

from tfslurm import hostlist
from tfslurm.errors import HostlistError, LayoutError
from tfslurm.errors import clip as _clip
from tfslurm.numbers import ascii_int
from tfslurm.step import MAX_TASKS

__all__ = ["MAX_HOSTFILE_BYTES", "MAX_TASKS", "parse_hostfile", "read_hostfile"]

#: Largest hostfile read (one short line per task of MAX_TASKS tasks fits easily).
MAX_HOSTFILE_BYTES = 1 << 26
_FAST_PARSE_BYTES = 1 << 23  # split a plain hostfile whole only up to 8 MiB (memory bound)


def parse_hostfile(text: str, source: str = "hostfile", limit: int | None = None) -> list[str]:
    """Hosts of a Slurm hostfile in task order, as srun reads ``SLURM_HOSTFILE``.

    ``#`` starts a comment; hosts are separated by newlines, blanks or commas outside
    brackets; each word is a hostlist (``node[3,1]``) optionally repeated as a group with
    ``*N`` (``node[2-3]*2`` is node2 node3 node2 node3). Reading stops after ``limit``
    hosts (srun uses the first ``-n`` entries), which also bounds memory.
    """
    cap = MAX_TASKS if limit is None else min(limit, MAX_TASKS)
    if "[" not in text and "*" not in text and len(text) <= _FAST_PARSE_BYTES:
        # Plain names only (the usual generated hostfile): let str.split do the work.
        if "#" in text:
            text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
        names = text.replace(",", " ").split()
        if len(names) > cap and limit is None:
            raise LayoutError(f"{source} lists more than {MAX_TASKS} tasks")
        return names[:cap]
    hosts: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if len(hosts) >= cap:
            if limit is not None:
                break  # srun ignores the rest
            raise LayoutError(f"{source} lists more than {MAX_TASKS} tasks")
        if "#" in line:
            line = line.split("#", 1)[0]
        words = _words(line) if "[" in line else line.replace(",", " ").split()
        for word in words:
            if "*" not in word and "[" not in word:
                hosts.append(word)
                continue
            expr, star, times = word.rpartition("*") if "*" in word else (word, "", "")
            count = ascii_int(times) if star else 1
            if count is None or not expr:
                raise LayoutError(f"{source} line {number}: {word!r} is not HOST or HOSTLIST*N")
            try:
                group = hostlist.expand(expr)
            except HostlistError as exc:
                raise LayoutError(f"{source} line {number}: {exc}") from None
            room = cap - len(hosts)
            if len(group) * count > room:
                if limit is None:
                    raise LayoutError(f"{source} lists more than {MAX_TASKS} tasks")
                count = room // max(1, len(group)) + 1  # enough to fill the step
            hosts.extend(group * count)
    if len(hosts) > cap and limit is None:
        raise LayoutError(f"{source} lists more than {MAX_TASKS} tasks")
    return hosts[:cap]


def _words(line: str) -> list[str]:
    """Split on blanks and commas that are not inside ``[...]``."""
    words: list[str] = []
    depth = 0
    current: list[str] = []
    for char in line:
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        if depth == 0 and (char == "," or char.isspace()):
            if current:
                words.append("".join(current))
                current = []
        else:
            current.append(char)
    if current:
        words.append("".join(current))
    return words


def read_hostfile(path: str, limit: int) -> list[str]:
    """Read SLURM_HOSTFILE as srun did, refusing what would hang the task (a FIFO, a
    device) and naming the likely cause of a relative path that is not found."""
    if "\x00" in path:
        raise LayoutError(f"SLURM_HOSTFILE={_clip(path)!r} is not a file name (it holds a NUL byte)")
    try:
        # O_NONBLOCK: opening a FIFO without a writer would otherwise block for ever
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if not os.path.isabs(path):
            raise LayoutError(
                f"SLURM_HOSTFILE={path!r} is a relative path and cannot be read from this "
                f"task's directory {os.getcwd()!r} ({exc.strerror}); srun read it from where it "
                "ran (--chdir moves the tasks): set SLURM_HOSTFILE to an absolute path"
            ) from None
        raise LayoutError(
            f"SLURM_HOSTFILE={path!r} cannot be read on this node ({exc.strerror}); "
            "put the hostfile on a shared file system"
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LayoutError(
                f"SLURM_HOSTFILE={path!r} is not a regular file (a pipe or device cannot be "
                "read again by every task); write the host list to a file"
            )
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            data = handle.read(MAX_HOSTFILE_BYTES + 1)
    except OSError as exc:
        raise LayoutError(f"SLURM_HOSTFILE={path!r} cannot be read on this node ({exc.strerror})") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > MAX_HOSTFILE_BYTES:
        raise LayoutError(f"SLURM_HOSTFILE={path!r} is larger than {MAX_HOSTFILE_BYTES} bytes")
    return parse_hostfile(data.decode("utf-8", "replace"), f"SLURM_HOSTFILE {path}", limit)
