"""The controller's answers from pyslurm: Slurm's C API in this process, no command per call.

A site that built pyslurm against its own Slurm (the ``pyslurm`` extra) gets each answer
in 1.5 to 3.5 ms instead of a command's 4 to 8 ms, without starting a process
(docs/pyslurm.md has the figures), which matters to loops that poll the controller.

pyslurm is only used when it is safe. ``import pyslurm`` initialises libslurm, and
libslurm ends the whole process (exit 1, nothing to catch) when it finds no configuration,
so the module is imported with its initialisation turned off and a child process tries
it first (:func:`probe`); the version check compares pyslurm's Slurm release with the running controller's
(major.minor), since pyslurm is built for exactly one release. :func:`load` says why not
in one line when it cannot be used, and ``controller()`` then takes the commands.

What pyslurm returns is read through plain records: ``job_record`` and ``node_record``
take the attributes named in :data:`JOB_ATTRIBUTES`, :data:`STEP_ATTRIBUTES` and
:data:`NODE_ATTRIBUTES` off pyslurm's objects, and ``job_info``, ``step_infos`` and
``node_info`` turn such records into tfslurm's values. The tests replay records seen on a
real cluster through the second half, where pyslurm is not installed.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from tfslurm.controller.interface import Controller, JobInfo, NodeInfo, StepInfo
from tfslurm.errors import ControllerError
from tfslurm.hostlist import expand
from tfslurm.step import slurm_conf_path

__all__ = [
    "JOB_ATTRIBUTES",
    "NODE_ATTRIBUTES",
    "STEP_ATTRIBUTES",
    "UNKNOWN_JOB",
    "PyslurmController",
    "answer_and_exit",
    "array_name",
    "job_info",
    "job_record",
    "load",
    "node_info",
    "node_record",
    "nodes_named",
    "probe",
    "release_of",
    "step_infos",
]

# The attributes of pyslurm.Job, pyslurm.JobStep and pyslurm.Node this backend reads.
JOB_ATTRIBUTES = (
    "id", "array_id", "array_task_id", "heterogeneous_id", "state", "state_reason",
    "allocated_nodes", "batch_host", "requeue_count",
)  # fmt: skip
STEP_ATTRIBUTES = ("id", "state", "allocated_nodes")
NODE_ATTRIBUTES = ("name", "state")

NO_AUTO_INIT = "PYSLURM_DISABLE_AUTO_INIT"
UNKNOWN_JOB = 2017  # Slurm's ESLURM_INVALID_JOB_ID: the controller does not know the job
PROBE_TIMEOUT = 30.0  # seconds, as long as the commands backend waits for a command


# ---------------------------------------------------------------------- records -> values
def job_record(job: Any) -> dict[str, Any]:
    """The attributes of a ``pyslurm.Job`` this backend reads, steps included, as plain data."""
    record = {name: getattr(job, name) for name in JOB_ATTRIBUTES}
    record["steps"] = [{name: getattr(step, name) for name in STEP_ATTRIBUTES} for step in job.steps.values()]
    return record


def node_record(node: Any) -> dict[str, Any]:
    """The attributes of a ``pyslurm.Node`` this backend reads, as plain data."""
    return {name: getattr(node, name) for name in NODE_ATTRIBUTES}


def job_info(record: Mapping[str, Any]) -> JobInfo:
    """A job record (:func:`job_record`) as tfslurm's :class:`JobInfo`."""
    reason = record.get("state_reason")
    batch_host = record.get("batch_host")
    return JobInfo(
        job_id=str(record["id"]),
        state=str(record["state"]).strip().upper(),
        nodes=_hosts(record.get("allocated_nodes")),
        batch_host=None if batch_host in (None, "", "(null)") else str(batch_host),
        restart_count=int(record.get("requeue_count") or 0),
        reason=None if reason in (None, "", "None", "(null)") else str(reason),
    )


def array_name(record: Mapping[str, Any]) -> str:
    """The job as ``squeue`` names its steps: ``<array>_<task>`` for an array task."""
    array, task = record.get("array_id"), record.get("array_task_id")
    if array and task is not None:
        return f"{array}_{task}"
    return str(record["id"])


def step_infos(record: Mapping[str, Any]) -> tuple[StepInfo, ...]:
    """The running steps in a job record, in ``squeue``'s order: by the step's number,
    the named steps numbered as Slurm numbers them (after every ordinary step)."""
    job_id = array_name(record)
    running = [step for step in record.get("steps", ()) if step.get("state") == "RUNNING"]
    running.sort(key=_step_number)
    return tuple(StepInfo(f"{job_id}.{step['id']}", _hosts(step.get("allocated_nodes"))) for step in running)


# Slurm's numbers of its named steps (SLURM_INTERACTIVE_STEP ... SLURM_PENDING_STEP in slurm.h)
NAMED_STEPS = {"interactive": 0xFFFFFFFA, "batch": 0xFFFFFFFB, "extern": 0xFFFFFFFC, "TBD": 0xFFFFFFFD}


def _step_number(step: Mapping[str, Any]) -> int:
    name = str(step["id"])
    return int(name) if name.isdigit() else NAMED_STEPS.get(name, 0xFFFFFFFF)


def node_info(record: Mapping[str, Any]) -> NodeInfo:
    """A node record (:func:`node_record`): ``IDLE+DRAIN`` is state IDLE, flags {DRAIN}."""
    state, *flags = str(record["state"]).strip().upper().split("+")
    return NodeInfo(str(record["name"]), state, frozenset(flags))


def _hosts(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Nodes as pyslurm gives them: a hostlist, or a hostlist pyslurm split at its commas."""
    if not value:
        return ()
    text = value if isinstance(value, str) else ",".join(value)
    return () if text.strip() in ("", "(null)") else tuple(expand(text))


def release_of(version: str) -> str:
    """``major.minor`` of a Slurm or pyslurm version (``25.11.7`` -> ``25.11``)."""
    return ".".join(version.strip().split(".")[:2])


# ---------------------------------------------------------------------- the backend
class PyslurmController:
    """The controller through pyslurm. pyslurm loads a job by its numeric id and reads the
    first component of a heterogeneous job only, so an array task named ``123_4`` and a
    heterogeneous job are asked of ``fallback()`` (the commands) instead."""

    __slots__ = ("_fallback", "_pyslurm")
    name = "pyslurm"

    def __init__(self, pyslurm: ModuleType, fallback: Callable[[], Controller]) -> None:
        self._pyslurm = pyslurm
        self._fallback = fallback

    def job(self, job_id: str) -> JobInfo:
        record = self._record(job_id)
        return self._fallback().job(job_id) if record is None else job_info(record)

    def steps(self, job_id: str) -> tuple[StepInfo, ...]:
        """The job's running steps; none for a job the controller does not know (as
        ``squeue --steps`` answers)."""
        try:
            record = self._record(job_id)
        except ControllerError as exc:
            if (
                isinstance(exc.__cause__, self._pyslurm.PyslurmError)
                and getattr(exc.__cause__, "errno", None) == UNKNOWN_JOB
            ):
                return ()
            raise
        return self._fallback().steps(job_id) if record is None else step_infos(record)

    def nodes(self, names: Sequence[str] = ()) -> tuple[NodeInfo, ...]:
        loaded = self._call("Nodes.load()", self._pyslurm.Nodes.load)
        return nodes_named([node_record(node) for node in loaded.values()], names)

    def requeue(self, job_id: str, *, hold: bool = False) -> None:
        if not job_id.isdigit():
            self._fallback().requeue(job_id, hold=hold)
            return
        job = self._pyslurm.Job(int(job_id))
        self._call(f"Job({job_id}).requeue(hold={hold})", job.requeue, hold=hold)

    def release(self, job_id: str) -> None:
        if not job_id.isdigit():
            self._fallback().release(job_id)
            return
        job = self._pyslurm.Job(int(job_id))
        self._call(f"Job({job_id}).release()", job.release)

    def shrink(self, job_id: str, nodes: Sequence[str]) -> None:
        # the shrink measured on a cluster is scontrol's (NodeList of a running job); the
        # commands make it, as they answer what pyslurm cannot load
        self._fallback().shrink(job_id, nodes)

    def _record(self, job_id: str) -> dict[str, Any] | None:
        """The job's record, or None where the commands must answer."""
        if not job_id.isdigit():
            return None
        record = job_record(self._call(f"Job.load({job_id})", self._pyslurm.Job.load, int(job_id)))
        return None if record.get("heterogeneous_id") else record

    def _call(self, what: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except self._pyslurm.PyslurmError as exc:
            raise ControllerError(f"pyslurm {what}: {exc}") from exc


def nodes_named(records: Sequence[Mapping[str, Any]], names: Sequence[str] = ()) -> tuple[NodeInfo, ...]:
    """The nodes of ``records`` (:func:`node_record`) named in ``names``, every node when
    ``names`` is empty."""
    wanted = set(names)
    return tuple(node_info(record) for record in records if not wanted or record["name"] in wanted)


# ---------------------------------------------------------------------- choosing it
def load(fallback: Callable[[], Controller], *, required: bool) -> PyslurmController | None:
    """A :class:`PyslurmController` when pyslurm imports, initialises and matches the
    running controller's release; otherwise None, after one line on stderr saying why
    (nothing when pyslurm is simply not installed and not ``required``), each reason once.

    libslurm is initialised once per process, with the configuration found then, so a
    pyslurm that works is kept; a refusal is kept for as long as ``SLURM_CONF`` stays the
    same."""
    if _CHOSEN:
        return PyslurmController(_CHOSEN[0], fallback)
    conf = slurm_conf_path()
    if conf not in _REFUSED:
        pyslurm, why = _choose()
        if pyslurm is not None:
            _CHOSEN.append(pyslurm)
            return PyslurmController(pyslurm, fallback)
        _REFUSED[conf] = why
    why = _REFUSED[conf]
    if (required or why != NOT_INSTALLED) and why not in _SAID:
        _SAID.add(why)
        print(f"tfslurm: {why}; using scontrol and sinfo", file=sys.stderr, flush=True)
    return None


NOT_INSTALLED = "pyslurm is not installed"
_CHOSEN: list[ModuleType] = []  # the initialised pyslurm
_REFUSED: dict[str | None, str] = {}  # SLURM_CONF -> why pyslurm cannot be used with it
_SAID: set[str] = set()


def _choose() -> tuple[ModuleType | None, str]:
    """(the initialised pyslurm module, "") or (None, why not)."""
    import importlib.util

    if importlib.util.find_spec("pyslurm") is None:
        return None, NOT_INSTALLED
    conf = slurm_conf_path()
    if conf and not os.access(conf, os.R_OK):  # libslurm would retry it for a minute, then exit
        return None, f"pyslurm cannot be used here: SLURM_CONF={conf} is not a readable file"
    # Imported without libslurm's initialisation, which may end the process. pyslurm reads
    # the variable while it is imported only; the tasks this process starts do not inherit it.
    before = os.environ.get(NO_AUTO_INIT)
    os.environ[NO_AUTO_INIT] = "1"
    try:
        import pyslurm
    except Exception as exc:  # a pyslurm built for a Slurm whose library is gone, mostly
        return None, f"pyslurm does not import ({type(exc).__name__}: {exc})"
    finally:
        if before is None:
            del os.environ[NO_AUTO_INIT]
        else:
            os.environ[NO_AUTO_INIT] = before
    mine = release_of(str(getattr(pyslurm, "__version__", "")))
    outcome = probe(pyslurm)
    if outcome.startswith("error libslurm"):
        return None, f"pyslurm {mine} cannot be used here: {outcome[6:]}"
    if outcome.startswith("error "):  # a controller of another release may not understand it
        return None, (
            f"pyslurm {mine} gets no answer from the controller ({outcome[6:]}); "
            "pyslurm must be built for the Slurm release the controller runs"
        )
    running = release_of(outcome[3:])
    if running != mine:
        return None, f"pyslurm is built for Slurm {mine} but the controller runs Slurm {running}"
    try:
        pyslurm.slurm_init()
    except Exception as exc:
        return None, f"pyslurm {mine} does not initialise ({type(exc).__name__}: {exc})"
    return pyslurm, ""


def probe(pyslurm: ModuleType, timeout: float = PROBE_TIMEOUT, fork: bool | None = None) -> str:
    """Initialise libslurm and ask the controller's version in a child process, whose exit
    cannot take this process down: ``ok VERSION`` or ``error WHY`` (one line).

    The child is a fork of this process (4 ms) when it runs one thread (``fork=None``), else
    a fresh Python (50 ms): a fork of a process with other threads (TensorFlow's, where a
    parameter server failure requeues the job) may inherit a lock one of them holds."""
    if fork is None:
        fork = len(os.listdir("/proc/self/task")) == 1 if os.path.isdir("/proc/self/task") else False
    read_end, write_end = os.pipe()
    child: _Forked | subprocess.Popen[bytes]
    if fork:
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read_end)
            answer_and_exit(pyslurm, write_end)
        child = _Forked(pid)
    else:
        child = _spawn_probe(pyslurm, write_end)
    os.close(write_end)
    text = _read_until_closed(read_end, time.monotonic() + timeout)
    if text is None:
        child.kill()
        child.wait()
        return f"error no answer from the controller within {timeout:g} s"
    status = child.wait()
    _, marker, answer = text.rpartition(_ANSWER)
    if marker:
        return answer
    said = answer.rsplit("fatal:", 1)[-1] if "fatal:" in answer else answer
    said = " ".join(said.split())[-300:] or "no message"
    return f"error libslurm ended the process (exit status {status}): {said}"


class _Forked:
    """A forked child, with the two calls of ``subprocess.Popen`` :func:`probe` makes."""

    __slots__ = ("pid",)

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)

    def wait(self) -> int:
        return os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])


def answer_and_exit(pyslurm: ModuleType, out: int) -> None:
    """In the probe's child: start libslurm, write the controller's version (or why not) to ``out``
    after whatever libslurm printed on stderr, and exit."""
    status = 0
    try:
        os.dup2(out, 2)  # libslurm's fatal() message comes first on the pipe
        pyslurm.slurm_init()
        answer = "ok " + str(pyslurm.slurmctld.Config.load().version)
    except BaseException as exc:
        answer = f"error {type(exc).__name__}: {exc}"
        status = 1
    try:
        os.write(out, (_ANSWER + " ".join(answer.split())).encode(errors="replace"))
    finally:
        os._exit(status)


def _spawn_probe(pyslurm: ModuleType, out: int) -> subprocess.Popen[bytes]:
    """A fresh Python running :func:`answer_and_exit` with ``out`` as its stdout."""
    where = os.path.dirname(os.path.dirname(os.path.abspath(str(pyslurm.__file__))))
    path = os.pathsep.join([where, *sys.path[1:]])
    code = (
        "import os, sys; os.environ['PYSLURM_DISABLE_AUTO_INIT'] = '1'; import pyslurm; "
        "from tfslurm.controller.pyslurm_backend import answer_and_exit; answer_and_exit(pyslurm, 1)"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=out,
        env={**os.environ, "PYTHONPATH": path},
    )


def _read_until_closed(fd: int, deadline: float) -> str | None:
    """Everything written to the pipe ``fd`` until its writer closes it; None past ``deadline``."""
    chunks: list[bytes] = []
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks).decode(errors="replace")
            chunks.append(chunk)
    finally:
        os.close(fd)


_ANSWER = "\n=tfslurm-probe= "  # precedes the child's answer, after whatever libslurm printed
