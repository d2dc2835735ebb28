"""The controller backend every Slurm has: ``squeue``, ``sinfo`` and ``scontrol``.

Each question asks for the few fields it needs, separated by ``|``, with ``-O``/``-o``
formats that every supported Slurm (22.05 to 26.05) prints alike. Why not ``--json``:
22.05's ``scontrol`` has no ``--json`` and its ``squeue --json`` ignores ``-j`` (it lists
every job), a JSON answer costs two to three times the text one, and none of the fields
asked for (ids, states, hostlists, host names, counts) can hold a ``|``. The free-text
reason is asked for last, so a ``|`` in it cannot shift the other fields. ``scontrol show
job`` is not parsed: a job name may hold ``JobState=...``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence

from tfslurm import hostlist
from tfslurm.controller.interface import JobInfo, NodeInfo, StepInfo
from tfslurm.errors import ControllerError, clip
from tfslurm.numbers import ascii_int

__all__ = ["CommandController", "parse_jobs", "parse_nodes", "parse_steps"]

TIMEOUT = 30.0  # seconds: a controller that does not answer in this time is reported
JOB_FORMAT = "JobID:|,State:|,NodeList:|,BatchHost:|,RestartCnt:|,Reason:|"
STEP_FORMAT = "%i|%N"
NODE_FORMAT = "NodeList:|,StateComplete:|"
# sinfo's one-character state suffixes and the flag each stands for
SUFFIX_FLAGS = {
    "*": "NOT_RESPONDING", "~": "POWERED_DOWN", "#": "POWERING_UP", "%": "POWERING_DOWN",
    "$": "MAINTENANCE", "@": "REBOOT_REQUESTED", "!": "POWER_DOWN", "^": "REBOOT_ISSUED",
    "-": "PLANNED",
}  # fmt: skip


class CommandController:
    """Answers from the Slurm commands on ``PATH`` (``SLURM_CONF`` and the rest as inherited)."""

    __slots__ = ("environ",)
    name = "commands"

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.environ = dict(os.environ if environ is None else environ)

    def job(self, job_id: str) -> JobInfo:
        out = self._call("squeue", "--noheader", "--states=all", "--jobs", job_id, "--Format", JOB_FORMAT)
        return parse_jobs(out, job_id)

    def steps(self, job_id: str) -> tuple[StepInfo, ...]:
        out = self._call("squeue", "--noheader", "--steps", "--jobs", job_id, "--format", STEP_FORMAT)
        return parse_steps(out)

    def nodes(self, names: Sequence[str] = ()) -> tuple[NodeInfo, ...]:
        which = ("--nodes", ",".join(names)) if names else ()
        return parse_nodes(self._call("sinfo", "--noheader", "--Node", *which, "--Format", NODE_FORMAT))

    def requeue(self, job_id: str, *, hold: bool = False) -> None:
        self._call("scontrol", "requeuehold" if hold else "requeue", job_id)

    def release(self, job_id: str) -> None:
        self._call("scontrol", "release", job_id)

    def shrink(self, job_id: str, nodes: Sequence[str]) -> None:
        self._call("scontrol", "update", f"JobId={job_id}", f"NodeList={hostlist.compress(nodes)}")

    def _call(self, *argv: str) -> str:
        shown = " ".join(argv)
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, errors="replace", env=self.environ,
                timeout=TIMEOUT, check=False,
            )  # fmt: skip
        except FileNotFoundError:
            raise ControllerError(
                f"{argv[0]} not found on PATH: tfslurm asks Slurm's controller with the Slurm "
                "commands; run it where they are installed"
            ) from None
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ControllerError(f"{shown}: {exc}") from None
        if done.returncode != 0:
            said = done.stderr.strip() or done.stdout.strip() or "no message"
            raise ControllerError(f"{shown} failed (exit {done.returncode}): {said}")
        return done.stdout


def _fields(line: str, count: int) -> list[str]:
    """The ``count`` fields of one ``|``-separated answer line; the last takes the rest."""
    fields = line.rstrip().removesuffix("|").split("|", count - 1)
    if len(fields) != count:
        raise ControllerError(f"unexpected answer from Slurm: {clip(line, 120)!r}")
    return fields


def _hosts(text: str) -> tuple[str, ...]:
    text = text.strip()
    return () if text in ("", "(null)", "n/a") else tuple(hostlist.expand(text))


def parse_jobs(text: str, job_id: str) -> JobInfo:
    """``squeue -O JOB_FORMAT`` for ``job_id``: one line, or one per heterogeneous component
    (their nodes are joined, in order, the first component giving the rest)."""
    rows = [_fields(line, 6) for line in text.splitlines() if line.strip()]
    if not rows:
        raise ControllerError(f"Slurm's controller does not know job {clip(job_id)}")
    first = rows[0]
    nodes: list[str] = []
    for row in rows:
        nodes.extend(host for host in _hosts(row[2]) if host not in nodes)
    batch_host = first[3].strip()
    reason = first[5].strip()
    return JobInfo(
        job_id=first[0].strip(),
        state=first[1].strip().upper(),
        nodes=tuple(nodes),
        batch_host=None if batch_host in ("", "n/a", "(null)") else batch_host,
        restart_count=_count(first[4], first[0]),
        reason=None if reason in ("", "None", "(null)") else reason,
    )


def _count(text: str, job_id: str) -> int:
    count = ascii_int(text.strip())
    if count is None:
        raise ControllerError(f"job {clip(job_id.strip())}: restart count {clip(text)!r} is not a number")
    return count


def parse_steps(text: str) -> tuple[StepInfo, ...]:
    """``squeue --steps --format STEP_FORMAT``: one step per line."""
    rows = [_fields(line, 2) for line in text.splitlines() if line.strip()]
    return tuple(StepInfo(step_id.strip(), _hosts(nodes)) for step_id, nodes in rows)


def parse_nodes(text: str) -> tuple[NodeInfo, ...]:
    """``sinfo --Node --Format NODE_FORMAT``: one line per node and partition; each node once."""
    seen: dict[str, NodeInfo] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, state_text = (field.strip() for field in _fields(line, 2))
        if name not in seen:
            seen[name] = parse_node_state(name, state_text)
    return tuple(seen.values())


def parse_node_state(name: str, text: str) -> NodeInfo:
    """``idle+drain``, ``down*``, ``mixed~`` as a base state and flags, upper case."""
    flags = set()
    while text and text[-1] in SUFFIX_FLAGS:
        flags.add(SUFFIX_FLAGS[text[-1]])
        text = text[:-1]
    base, *more = text.upper().split("+")
    flags.update(more)
    return NodeInfo(name, base, frozenset(flags))
