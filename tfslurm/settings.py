"""tfslurm's own settings (the ``TFSLURM_*`` variables), as one immutable snapshot.

:meth:`Settings.from_environ` is the one place that reads them; everything else is handed
the snapshot (``Step.settings``, or a ``Settings`` an entry point built) and asks it. A
setting that can be malformed is kept as the text that was set and parsed by its accessor
(:meth:`Settings.port_base`, :meth:`Settings.max_restarts` ...), which raises the one-line
error naming the variable. Parsing on use, not when the snapshot is built, keeps a bad
setting an error only where it matters (a malformed ``TFSLURM_STOP_GRACE`` does not stop
``tfslurm layout``), exactly as when each module read its own variable.

Only the standard library is used: this runs in the TaskProlog of every task.
"""

from __future__ import annotations

import os

from tfslurm.errors import ControllerError, GpuError, PortError, PreemptionError, RoleError, StopError
from tfslurm.errors import clip as _clip
from tfslurm.numbers import ascii_int
from tfslurm.value import Value, one_of

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the TaskProlog path)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Final, Literal

    #: ``TFSLURM_UNEVEN_GPUS``: what unequal GPU counts among a step's tasks are.
    UnevenGpus = Literal["warn", "error"]

__all__ = [
    "ASSIGNED_VARIABLE",
    "DESCRIPTOR_VARIABLE",
    "FOR_VARIABLE",
    "HOST_TEMPLATE_VARIABLE",
    "IFACE_VARIABLE",
    "TF_DIST_VARIABLE",
    "UNEVEN_GPUS",
    "UNEVEN_VARIABLE",
    "Settings",
    "parse_max_restarts",
    "parse_peer_timeout",
    "parse_stop_grace",
    "recovery_settings",
    "signal_number",
    "stop_signals",
]

#: ``--tf-dist``: the jobs spec (``ps:1,worker:*``), set by the SPANK plugin's option or by
#: the user; set in a task, it asks the TaskProlog hook for a TF cluster.
TF_DIST_VARIABLE = "TFSLURM_TF_DIST"
#: The plan, compressed, where TF_CONFIG would be too large (``tfslurm.descriptor``).
DESCRIPTOR_VARIABLE = "TFSLURM_DESCRIPTOR"
#: A host name template such as ``{node}-ib``.
HOST_TEMPLATE_VARIABLE = "TFSLURM_HOST_TEMPLATE"
#: The frameworks to give variables for (``tf,keras,jax,torch``).
FOR_VARIABLE = "TFSLURM_FOR"
#: The network interface to advertise every node on.
IFACE_VARIABLE = "TFSLURM_IFACE"
#: ``warn`` (default) or ``error``: whether unequal GPU counts among the step's tasks only
#: warn or are a GpuError (MultiWorkerMirroredStrategy needs equal counts).
UNEVEN_VARIABLE = "TFSLURM_UNEVEN_GPUS"
#: Set with a task's devices: ``<job>.<step>.<procid>:<variable>=<value>`` (``tfslurm.gpus``;
#: read with the GPU variables, ``tfslurm.step.GpuVariables``).
ASSIGNED_VARIABLE = "TFSLURM_ASSIGNED_GPUS"
PORT_BASE_VARIABLE = "TFSLURM_PORT_BASE"
PEER_TIMEOUT_VARIABLE = "TFSLURM_PEER_TIMEOUT"
PREEMPT_SIGNAL_VARIABLE = "TFSLURM_PREEMPT_SIGNAL"
STOP_SIGNALS_VARIABLE = "TFSLURM_STOP_SIGNALS"
MAX_RESTARTS_VARIABLE = "TFSLURM_MAX_RESTARTS"
STOP_GRACE_VARIABLE = "TFSLURM_STOP_GRACE"
REQUEUE_VARIABLE = "TFSLURM_REQUEUE_ON_PS_FAILURE"
#: Which backend answers tfslurm's questions to Slurm's controller (``tfslurm.controller``).
CONTROLLER_VARIABLE = "TFSLURM_CONTROLLER"
CONTROLLER_BACKENDS = ("auto", "commands", "pyslurm")
#: Set by ``tfslurm run`` in the program's process: its parent watches peers,
#: signals and the restart cap. ``container`` where the program runs in a container that
#: ``tfslurm run`` started (``tfslurm.runtime.container``).
WATCHED_VARIABLE = "TFSLURM_WATCHED"
WATCHED_IN_CONTAINER = "container"
#: A container command (``ch-run /img --``, ``podman run IMAGE``) that ``tfslurm run``
#: starts its program in (``tfslurm.runtime.container``).
CONTAINER_VARIABLE = "TFSLURM_CONTAINER"
#: ``tfslurm supervise``: nodes kept idle to replace a lost one; what to do when none is
#: left (requeue or shrink); relaunches allowed in one allocation; seconds without a step
#: line that mean a stuck step; the regular expression of a step line.
SPARE_NODES_VARIABLE = "TFSLURM_SPARE_NODES"
ON_NODE_LOSS_VARIABLE = "TFSLURM_ON_NODE_LOSS"
STEP_RESTARTS_VARIABLE = "TFSLURM_STEP_RESTARTS"
HEARTBEAT_VARIABLE = "TFSLURM_HEARTBEAT_TIMEOUT"
STEP_LINE_VARIABLE = "TFSLURM_STEP_LINE"
STRAGGLER_VARIABLE = "TFSLURM_STRAGGLER"
#: Set by tfslurm supervise for its srun: where each rank sends its heartbeats and steps.
PROGRESS_VARIABLE = "TFSLURM_PROGRESS"

DEFAULT_PEER_TIMEOUT = 300.0
DEFAULT_PREEMPT_SIGNAL = "USR1"
DEFAULT_STOP_SIGNALS = ("TERM",)  # plus the preemption signal itself


#: Every UnevenGpus, the values TFSLURM_UNEVEN_GPUS takes.
UNEVEN_GPUS: Final[tuple[UnevenGpus, ...]] = ("warn", "error")


class Settings(Value):
    """What the ``TFSLURM_*`` variables said; None where a variable was not set.

    Texts are kept as they were set (a message quotes them); the accessors parse them.
    """

    __match_args__ = (
        "tf_dist",
        "descriptor",
        "host_template",
        "port_base_text",
        "frameworks",
        "iface",
        "uneven_gpus_text",
        "peer_timeout_text",
        "preempt_signal_text",
        "stop_signals_text",
        "max_restarts_text",
        "stop_grace_text",
        "requeue_on_ps_failure",
        "watched",
        "controller_text",
        "container",
        "watched_in_container",
        "progress_text",
    )
    __slots__ = __match_args__

    def __init__(
        self,
        *,
        tf_dist: str | None = None,
        descriptor: str | None = None,
        host_template: str | None = None,
        port_base_text: str | None = None,
        frameworks: str | None = None,
        iface: str | None = None,
        uneven_gpus_text: str | None = None,
        peer_timeout_text: str = "",
        preempt_signal_text: str | None = None,
        stop_signals_text: str | None = None,
        max_restarts_text: str | None = None,
        stop_grace_text: str | None = None,
        requeue_on_ps_failure: bool = False,
        watched: bool = False,
        controller_text: str | None = None,
        container: str | None = None,
        watched_in_container: bool = False,
        progress_text: str | None = None,
    ) -> None:
        #: The jobs spec of ``--tf-dist`` (TFSLURM_TF_DIST) as set; None when unset or empty.
        self.tf_dist: Final = tf_dist or None
        self.descriptor: Final = descriptor  # TFSLURM_DESCRIPTOR
        self.host_template: Final = host_template  # TFSLURM_HOST_TEMPLATE; an empty one is None
        self.port_base_text: Final = port_base_text  # TFSLURM_PORT_BASE, as set
        self.frameworks: Final = frameworks  # TFSLURM_FOR, as set (tfslurm.frameworks)
        self.iface: Final = iface  # TFSLURM_IFACE, stripped; a blank one is None
        self.uneven_gpus_text: Final = uneven_gpus_text  # TFSLURM_UNEVEN_GPUS, as set
        self.peer_timeout_text: Final = peer_timeout_text  # TFSLURM_PEER_TIMEOUT, as set
        self.preempt_signal_text: Final = preempt_signal_text  # TFSLURM_PREEMPT_SIGNAL
        self.stop_signals_text: Final = stop_signals_text  # TFSLURM_STOP_SIGNALS
        self.max_restarts_text: Final = max_restarts_text  # TFSLURM_MAX_RESTARTS
        self.stop_grace_text: Final = stop_grace_text  # TFSLURM_STOP_GRACE
        self.requeue_on_ps_failure: Final = requeue_on_ps_failure  # TFSLURM_REQUEUE_ON_PS_FAILURE
        self.watched: Final = watched  # TFSLURM_WATCHED is set and not empty
        self.controller_text: Final = controller_text  # TFSLURM_CONTROLLER, as set
        self.container: Final = container  # TFSLURM_CONTAINER; a blank one is None
        self.watched_in_container: Final = watched_in_container  # TFSLURM_WATCHED=container
        self.progress_text: Final = progress_text  # TFSLURM_PROGRESS (tfslurm supervise sets it)

    @classmethod
    def from_environ(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read the ``TFSLURM_*`` variables from ``env`` (default: ``os.environ``).

        Never raises: a malformed setting is an error only when its accessor is asked.
        """
        source = os.environ if env is None else env
        return cls(
            tf_dist=source.get(TF_DIST_VARIABLE),
            descriptor=source.get(DESCRIPTOR_VARIABLE),
            host_template=source.get(HOST_TEMPLATE_VARIABLE) or None,
            port_base_text=source.get(PORT_BASE_VARIABLE),
            frameworks=source.get(FOR_VARIABLE),
            iface=source.get(IFACE_VARIABLE, "").strip() or None,
            uneven_gpus_text=source.get(UNEVEN_VARIABLE),
            peer_timeout_text=source.get(PEER_TIMEOUT_VARIABLE, ""),
            preempt_signal_text=source.get(PREEMPT_SIGNAL_VARIABLE) or None,
            stop_signals_text=source.get(STOP_SIGNALS_VARIABLE) or None,
            max_restarts_text=source.get(MAX_RESTARTS_VARIABLE) or None,
            stop_grace_text=source.get(STOP_GRACE_VARIABLE) or None,
            requeue_on_ps_failure=source.get(REQUEUE_VARIABLE, "") in ("1", "yes", "true"),
            watched=bool(source.get(WATCHED_VARIABLE)),
            controller_text=source.get(CONTROLLER_VARIABLE),
            container=source.get(CONTAINER_VARIABLE, "").strip() or None,
            watched_in_container=source.get(WATCHED_VARIABLE) == WATCHED_IN_CONTAINER,
            progress_text=source.get(PROGRESS_VARIABLE) or None,
        )

    @property
    def asked_for_cluster(self) -> bool:
        """``TFSLURM_TF_DIST`` is set and not blank: the task asked for a TF cluster."""
        return bool((self.tf_dist or "").strip())

    def port_base(self) -> int | None:
        """``TFSLURM_PORT_BASE`` as a port, None when unset or blank; else a PortError."""
        raw = (self.port_base_text or "").strip()
        if not raw:
            return None
        port = ascii_int(raw, 5)
        if port is None or not 1 <= port <= 65535:
            raise PortError(f"{PORT_BASE_VARIABLE}={_clip(raw)!r} is not a port (1..65535)")
        return port

    def controller_backend(self) -> str:
        """``TFSLURM_CONTROLLER`` (default ``auto``); a ControllerError for an unknown name."""
        choice = (self.controller_text or "").strip().lower() or "auto"
        if choice not in CONTROLLER_BACKENDS:
            raise ControllerError(
                f"{CONTROLLER_VARIABLE}={_clip(self.controller_text or '')!r} is not a controller "
                f"backend: use one of {', '.join(CONTROLLER_BACKENDS)}"
            )
        return choice

    def uneven_gpus(self) -> UnevenGpus:
        """``TFSLURM_UNEVEN_GPUS`` (default warn); a GpuError for anything but warn/error."""
        mode = (self.uneven_gpus_text or "warn").strip().lower() or "warn"
        uneven = one_of(mode, UNEVEN_GPUS)
        if uneven is None:
            raise GpuError(
                f"{UNEVEN_VARIABLE}={_clip(self.uneven_gpus_text or '')!r} must be 'warn' or 'error'"
            )
        return uneven

    def peer_timeout(self) -> float:
        """``TFSLURM_PEER_TIMEOUT`` seconds (default 300); a RoleError unless positive."""
        if not self.peer_timeout_text:
            return DEFAULT_PEER_TIMEOUT
        return parse_peer_timeout(self.peer_timeout_text, f"{PEER_TIMEOUT_VARIABLE}=")

    def preempt_signal(self) -> int:
        """``TFSLURM_PREEMPT_SIGNAL``'s number (default USR1); a PreemptionError if it is
        not a signal that can be caught."""
        return signal_number(self.preempt_signal_text or DEFAULT_PREEMPT_SIGNAL)

    def stop_signals(self, preempt: int) -> tuple[int, ...]:
        """``TFSLURM_STOP_SIGNALS`` (default TERM) with the preemption signal ``preempt``."""
        return stop_signals(self.stop_signals_text, preempt)

    def max_restarts(self) -> int | None:
        """``TFSLURM_MAX_RESTARTS``, or None (no cap); a StopError unless an integer >= 0."""
        return None if self.max_restarts_text is None else parse_max_restarts(self.max_restarts_text)

    def stop_grace(self) -> float | None:
        """``TFSLURM_STOP_GRACE`` seconds, or None (Slurm's SIGKILL); a StopError unless >= 0."""
        return None if self.stop_grace_text is None else parse_stop_grace(self.stop_grace_text)


def parse_peer_timeout(raw: str, name: str = "peer timeout ") -> float:
    """``raw`` as a positive number of seconds; a RoleError otherwise (0 would give up at
    once, NaN never). ``name`` starts the message."""
    try:
        seconds = float(raw)
    except ValueError:
        seconds = float("nan")  # not math.nan: math is a shared library to load per hook run
    if not seconds > 0:
        raise RoleError(f"{name}{_clip(raw)!r} is not a positive number of seconds")
    return seconds


def parse_max_restarts(value: int | str) -> int:
    """``--max-restarts`` or TFSLURM_MAX_RESTARTS: an integer >= 0."""
    cap = ascii_int(str(value).strip())
    if cap is None:
        raise StopError(
            f"max restarts {_clip(str(value))!r} is not an integer >= 0 "
            f"(--max-restarts / {MAX_RESTARTS_VARIABLE}; unset for no cap)"
        )
    return cap


def parse_stop_grace(value: float | str) -> float:
    """``--stop-grace`` or TFSLURM_STOP_GRACE: seconds >= 0."""
    try:
        seconds = float(str(value).strip())
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):  # also refuses nan
        raise StopError(
            f"stop grace {_clip(str(value))!r} is not a number of seconds >= 0 "
            f"(--stop-grace / {STOP_GRACE_VARIABLE}; unset: Slurm's SIGKILL)"
        )
    return seconds


PREEMPTION_SIGNAL = "preemption signal"
STOP_SIGNAL = "stop signal"


def signal_number(name: str | int, what: str = PREEMPTION_SIGNAL) -> int:
    """The one parser of a signal: ``USR1``, ``SIGUSR1``, ``10`` -> 10. Anything else is a
    one-line error naming ``what`` it was given as: a PreemptionError for the preemption
    signal, a StopError for a stop signal."""
    import signal  # only the runtime asks

    error = PreemptionError if what == PREEMPTION_SIGNAL else StopError

    if isinstance(name, int):  # str() of an int past 4,300 digits would raise: none is a signal
        text, number = (str(name), name) if 0 <= name < 1 << 16 else ("out of range", None)
    else:
        text = str(name).strip()
        number = ascii_int(text)
    shown = repr(_clip(text))
    if number is not None or (text.isascii() and text.isdigit()) or isinstance(name, int):
        try:
            signal.Signals(-1 if number is None else number)
        except ValueError:
            raise error(f"{what} {shown} is not a signal number") from None
    else:
        upper = text.upper()
        upper = upper if upper.startswith("SIG") else "SIG" + upper
        try:
            number = int(signal.Signals[upper])
        except KeyError:
            raise error(f"{what} {shown} is not a signal name (try USR1, USR2, TERM)") from None
    assert number is not None
    if number in (signal.SIGKILL, signal.SIGSTOP):
        raise error(f"{what} {shown} cannot be caught (try USR1, USR2, TERM)")
    return number


def stop_signals(text: str | None, preempt: int) -> tuple[int, ...]:
    """The signals that ask for checkpoint-and-stop: ``TERM,USR2`` (TFSLURM_STOP_SIGNALS or
    ``--stop-signals``; default SIGTERM), always with the preemption signal itself."""
    import signal

    names = DEFAULT_STOP_SIGNALS if text is None else [t for t in text.split(",") if t.strip()]
    numbers = [signal_number(n, STOP_SIGNAL) for n in names]
    if signal.SIGINT in numbers:
        raise StopError(
            "stop signal INT: SIGINT stays Ctrl-C (forwarded, then the program "
            "is ended); choose TERM, USR1, USR2, ..."
        )
    return tuple(dict.fromkeys([preempt, *numbers]))


if TYPE_CHECKING:
    from typing import TypedDict

    class RecoveryVariables(TypedDict):
        """:func:`recovery_settings`: the ``tfslurm supervise`` variables by field name."""

        spares: str | None
        on_node_loss: str | None
        step_restarts: str | None
        heartbeat: str | None
        step_line: str | None
        straggler: str | None


def recovery_settings(env: Mapping[str, str]) -> RecoveryVariables:
    """The ``tfslurm supervise`` variables of ``env`` as set, None where unset or empty, by
    the name of the field of ``tfslurm.runtime.nodeloss.RecoverySettings`` each one fills."""
    return {
        "spares": env.get(SPARE_NODES_VARIABLE) or None,
        "on_node_loss": env.get(ON_NODE_LOSS_VARIABLE) or None,
        "step_restarts": env.get(STEP_RESTARTS_VARIABLE) or None,
        "heartbeat": env.get(HEARTBEAT_VARIABLE) or None,
        "step_line": env.get(STEP_LINE_VARIABLE) or None,
        "straggler": env.get(STRAGGLER_VARIABLE) or None,
    }
