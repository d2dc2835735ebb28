"""The exceptions tfslurm raises for bad input.

Every error a user can cause is a ``ValueError`` subclass with a one-line message that
names the offending input and what is wrong with it, so scripts can catch one type and
the CLI can print one line and exit 2.
"""

from __future__ import annotations

MAX_MESSAGE = 400  # characters; the input in a message may be megabytes


class TfslurmError(ValueError):
    """Base class: bad input or an environment tfslurm cannot work with.

    The message is made one bounded line here, whatever text of the input it quotes: a
    newline would split the CLI's one-line error, and a quoted input may be megabytes.
    """

    def __init__(self, message: object = "", *args: object) -> None:
        super().__init__(one_line(str(message)), *args)


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` escaped (:func:`escaped`: no line break or other control character is left)
    and its middle elided past ``limit`` characters (the end of a message says how to fix
    it, so it is kept). Only the two ends are escaped when the middle goes: a megabyte of
    input costs no more than its first and last few hundred characters."""
    if len(text) <= limit and text.isprintable():
        return text
    tail = limit // 3
    head = limit - tail - 5
    if len(text) <= limit:
        text = escaped(text)
        if len(text) <= limit:
            return text
    return escaped(text[:head])[:head] + " ... " + escaped(text[-tail:])[-tail:]


def escaped(text: str) -> str:
    """``text`` with every character that is not printable (C0 and C1 control characters,
    DEL, line and paragraph separators, lone surrogates of undecodable bytes) written as
    ``repr()`` writes it (``\\x1b``, ``\\n``, ``\\udcff``): the one escaping of input that a
    message or warning shows, so that no value can move the cursor, clear a terminal or
    start a line of its own. Printable text, backslashes included, is left as it is."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


class HostlistError(TfslurmError):
    """A hostlist or task-count expression that Slurm would reject."""


class SlurmEnvError(TfslurmError):
    """The Slurm environment lacks (or has malformed) what was asked for."""


class LayoutError(TfslurmError):
    """The rank -> node map cannot be determined (or does not match reality)."""


class JobSpecError(TfslurmError):
    """A jobs spec such as ``ps:1,worker:*`` that is malformed or does not add up."""


class GpuError(TfslurmError):
    """GPU settings that contradict what Slurm gave the task."""


class PortError(TfslurmError):
    """Port settings that cannot give every task a distinct port."""


class PlanError(TfslurmError):
    """A cluster plan that cannot be built or a descriptor that cannot be read."""


class PrologError(TfslurmError):
    """Variables that cannot be passed through Slurm's TaskProlog protocol."""


class IfaceError(TfslurmError):
    """A network interface that is missing, misnamed or whose name resolves elsewhere."""


class RuntimeListError(TfslurmError):
    """A runtime list that names an unknown runtime."""


class RoleError(TfslurmError):
    """This task's role cannot be determined, or the cluster it names cannot be trained."""


class StopError(TfslurmError):
    """A stop-signal list or restart cap that cannot be used."""


class ContainerError(TfslurmError):
    """A container command (TFSLURM_CONTAINER, or typed before the program) that cannot be used."""


class PreemptionError(TfslurmError):
    """A preemption signal name that is not a signal."""


class TensorFlowMissing(TfslurmError):
    """TensorFlow is not importable by this interpreter."""


class DemoError(TfslurmError):
    """The demo cannot run here (no root, no Slurm, no TensorFlow)."""


class ControllerError(TfslurmError):
    """A question to Slurm's controller failed: the call and Slurm's answer, in one line."""


class ClusterError(RuntimeError):
    """The local test cluster could not be started or used (not bad user input)."""


class ClusterTimeout(ClusterError):
    """A command run against the local test cluster did not finish in time (it was terminated)."""

    def __init__(self, message: str, stdout: str = "", stderr: str = "") -> None:
        super().__init__(message)
        self.stdout = stdout
        self.stderr = stderr


class ClusterConfigError(TfslurmError):
    """An option of the local test cluster is out of range or malformed: ``field`` (a
    :class:`ClusterConfig` field; None for what names no one field), the value as shown
    (None: not shown) and the problem; the message names the field, :meth:`named` another
    name for it (the command-line option it came from)."""

    def __init__(self, field: str | None, value: str | None, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(self.named(field, "="))

    def named(self, name: str | None, between: str) -> str:
        """``name<between>value: problem`` (``name: problem`` without a value)."""
        if name is None:
            return self.problem
        if self.value is None:
            return f"{name}: {self.problem}"
        return f"{name}{between}{self.value}: {self.problem}"


class ParameterServerFailure(RuntimeError):
    """A parameter server went away: training cannot go on without its variables."""


class RestartCapReached(RuntimeError):
    """The job was restarted more often than its cap allows: the run must not start. Not a
    TfslurmError: its exit status is ``runtime.exits.EXIT_RESTART_CAP``, not a usage error's 2."""


def clip(text: str, limit: int = 60) -> str:
    """User text shortened for a one-line error message (the input may be megabytes)."""
    return text if len(text) <= limit else text[:limit] + "..."


def shown(text: str, limit: int = 60) -> str:
    """repr() of clipped user text: quoted, escapes visible, one line."""
    return repr(clip(text, limit))


def bare(text: str, limit: int = 60) -> str:
    """Clipped user text escaped as :func:`shown` escapes it, without the quotes: a node
    name in a sentence (``on node n1``)."""
    return escaped(clip(text, limit))


class NodeLossError(TfslurmError):
    """A node-loss recovery setting (spares, shrink, heartbeat, restarts) is malformed or
    cannot work with this job."""
