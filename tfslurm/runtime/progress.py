"""Each rank's progress, sent to ``tfslurm supervise``: how a hung rank is told apart.

The supervisor listens on a UDP port of the batch host and gives srun
``TFSLURM_PROGRESS=<host>:<port>/<launch>``. In each program ``tfslurm.run`` then starts a
:class:`Beacon`: a daemon thread that sends one datagram a second (``beat``), and
``ctx.step(n)`` sends one at once (``step``), with the rank's own time in that step
(``ctx.own_time()``, :mod:`tfslurm.runtime.straggler`). A datagram costs a few microseconds
and is never waited for: a lost one is only a later heartbeat.

A rank that stops (SIGSTOP, a debugger, a call that holds the GIL) stops beating. Ranks
that wait in a collective for it keep beating: TensorFlow's waits release the GIL. So the
hung rank is the one whose beats stopped while others go on (:func:`hung_ranks`); a slow
phase on a live rank (a 30 s checkpoint save, evaluation, compilation) beats throughout
and is never taken for a hang. The window is derived from the step times seen so far
(:func:`hang_window`), with a floor, and a start-up allowance before the first step.
"""

from __future__ import annotations

import atexit
import collections
import socket
import statistics
import threading
import time
from typing import TYPE_CHECKING

from tfslurm.errors import NodeLossError
from tfslurm.runtime.probe import answers
from tfslurm.runtime.straggler import OwnTimes
from tfslurm.settings import PROGRESS_VARIABLE
from tfslurm.value import Value

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Final

#: Seconds between two heartbeats of a rank.
BEAT_S = 1.0
#: The least time without a heartbeat that makes a rank hung: a few missed beats on a
#: loaded node are not a hang.
HANG_FLOOR_S = 5.0
#: Steps' worth of silence that make a rank hung, once step times are known.
HANG_STEPS = 3
#: The window before any rank reported a step: imports and the first compilation can hold
#: the GIL for seconds at a time.
STARTUP_S = 60.0
#: Step intervals the window is the median of: the latest ones.
INTERVALS_KEPT = 200


class ProgressTarget(Value):
    """Where the ranks of one launch send their progress: TFSLURM_PROGRESS."""

    __slots__ = ("host", "launch", "port")
    __match_args__ = ("host", "port", "launch")

    def __init__(self, host: str, port: int, launch: int) -> None:
        self.host: Final = host
        self.port: Final = port
        self.launch: Final = launch

    @classmethod
    def parse(cls, text: str) -> ProgressTarget:
        """``HOST:PORT/LAUNCH``; a NodeLossError naming the variable otherwise."""
        host, sep, rest = text.rpartition(":")
        port, _, launch = rest.partition("/")
        if not sep or not host or not port.isdigit() or not launch.isdigit() or not 0 < int(port) < 65536:
            raise NodeLossError(
                f"{PROGRESS_VARIABLE}={text!r}: expected HOST:PORT/LAUNCH (tfslurm supervise sets it; unset it)"
            )
        return cls(host, int(port), int(launch))


def progress_target(text: str | None) -> ProgressTarget | None:
    """The target of TFSLURM_PROGRESS's text (``Settings.progress_text``); None when unset:
    no supervisor listens."""
    return ProgressTarget.parse(text) if text else None


class Beacon:
    """The program's side: a heartbeat thread and :meth:`step`. Sending never blocks and
    never raises: the training must not depend on the supervisor's port."""

    __slots__ = ("_address", "_own", "_socket", "_step", "node", "rank", "target", "task")

    def __init__(self, target: ProgressTarget, rank: int, task: str, node: str) -> None:
        self.target = target
        self.rank = rank
        self.task = task
        self.node = node
        self._step = -1
        self._own = 0.0  # seconds of own work marked since the last step report
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.setblocking(False)
        try:  # once: a name lookup per datagram would cost more than the datagram
            self._address: tuple[str, int] | None = (socket.gethostbyname(target.host), target.port)
        except OSError:
            self._address = None

    def start(self) -> Beacon:
        threading.Thread(target=self._beat, name="tfslurm-beacon", daemon=True).start()
        # a rank done before the others (its program returned) is not a silent one
        atexit.register(self._send, "exit")
        return self

    def step(self, number: int) -> None:
        """Step ``number`` is done; the own time marked since the last one goes with it."""
        self._step = number
        self._send("step", round(self._own * 1e6))
        self._own = 0.0

    def own_time(self) -> _OwnTime:
        """``with beacon.own_time():`` counts the block's time as the rank's own work in
        the current step (a plain object, not a generator: two clock reads and an add)."""
        return _OwnTime(self)

    def add_own(self, seconds: float) -> None:
        self._own += seconds

    def _beat(self) -> None:
        while True:
            self._send("beat")
            time.sleep(BEAT_S)

    def _send(self, kind: str, own_us: int = 0) -> None:
        if self._address is None:
            return
        t = self.target
        message = f"{kind} {t.launch} {self.rank} {self.task} {self.node} {self._step} {own_us}"
        try:
            self._socket.sendto(message.encode(), self._address)
        except OSError:
            pass


class _OwnTime:
    __slots__ = ("_beacon", "_start")

    def __init__(self, beacon: Beacon) -> None:
        self._beacon = beacon
        self._start = 0.0

    def __enter__(self) -> None:
        self._start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self._beacon.add_own(time.perf_counter() - self._start)


class RankState(Value):
    """What the supervisor last heard from one rank (times: the supervisor's monotonic
    clock at receipt); ``exited``: its program has ended."""

    __slots__ = ("beat", "exited", "node", "rank", "step", "task")
    __match_args__ = ("rank", "task", "node", "step", "beat", "exited")

    def __init__(self, rank: int, task: str, node: str, step: int, beat: float, exited: bool = False) -> None:
        self.rank: Final = rank
        self.task: Final = task
        self.node: Final = node
        self.step: Final = step
        self.beat: Final = beat
        self.exited: Final = exited


def hang_window(intervals: Sequence[float]) -> float:
    """Seconds without a heartbeat that make a rank hung: :data:`STARTUP_S` before any
    step, else :data:`HANG_STEPS` times the median step interval, at least
    :data:`HANG_FLOOR_S`."""
    if not intervals:
        return STARTUP_S
    return max(HANG_FLOOR_S, HANG_STEPS * statistics.median(intervals))


def hung_ranks(states: Mapping[int, RankState], now: float, window: float) -> list[RankState]:
    """The ranks silent for more than ``window`` while another rank beat within it (when
    every rank is silent, the fault is between them and the supervisor: not a hang)."""
    running = [s for s in states.values() if not s.exited]
    silent = [s for s in running if now - s.beat > window]
    if not silent or len(silent) == len(running):
        return []
    return sorted(silent, key=lambda s: s.rank)


class ProgressBoard:
    """The supervisor's side: a UDP socket on every interface and a thread that keeps
    each rank's latest :class:`RankState` for the current launch."""

    __slots__ = ("_listener", "_lock", "_own", "_socket", "_steps", "intervals", "launch", "port", "states")

    def __init__(self) -> None:
        self._socket, self._listener = _bound_pair()
        self.port: int = self._socket.getsockname()[1]
        self._lock = threading.Lock()
        self.launch = 0
        self.states: dict[int, RankState] = {}
        # between a rank's consecutive step reports: the latest INTERVALS_KEPT, so that a
        # long training neither grows the supervisor nor keeps the window on its first steps
        self.intervals: collections.deque[float] = collections.deque(maxlen=INTERVALS_KEPT)
        self._steps: dict[int, float] = {}  # rank -> when its last step report came
        self._own = OwnTimes()
        threading.Thread(target=self._receive, name="tfslurm-progress", daemon=True).start()
        threading.Thread(target=self._answer, name="tfslurm-fence", daemon=True).start()

    def address(self, host: str) -> str:
        """TFSLURM_PROGRESS for the current launch."""
        return f"{host}:{self.port}/{self.launch}"

    def next_launch(self) -> None:
        """Forget the ranks of the last launch; datagrams of its processes are ignored."""
        with self._lock:
            self.launch += 1
            self.states = {}
            self._steps = {}
            self._own = OwnTimes()

    def snapshot(self) -> tuple[dict[int, RankState], list[float]]:
        """The ranks heard from in this launch, and the step intervals seen so far (none
        before this launch's first step report: its start-up gets the allowance)."""
        with self._lock:
            return dict(self.states), list(self.intervals) if self._steps else []

    def newest_own_step(self) -> int | None:
        """The highest step of this launch with an own time (None: none yet)."""
        with self._lock:
            return self._own.newest

    def own_times(self) -> dict[int, dict[int, float]]:
        """This launch's own times: step -> rank -> seconds (ranks that mark their own work)."""
        with self._lock:
            return self._own.table()

    def _answer(self) -> None:
        """Accept and close every connection: a rank's parent connects to learn that it can
        still reach the supervisor (:func:`watch_reach`)."""
        while True:
            connection, _ = self._listener.accept()
            connection.close()

    def _receive(self) -> None:
        while True:
            data = self._socket.recv(512)
            self.record(data, time.monotonic())

    def record(self, data: bytes, now: float) -> None:
        """Take one datagram (malformed ones and other launches' are dropped)."""
        fields = data.decode(errors="replace").split()
        if len(fields) != 7 or fields[0] not in ("beat", "step", "exit"):
            return
        kind, launch, rank, task, node, step, own_us = fields
        if not (launch.isdigit() and rank.isdigit() and step.lstrip("-").isdigit() and own_us.isdigit()):
            return
        with self._lock:
            if int(launch) != self.launch:
                return
            number = int(rank)
            self.states[number] = RankState(number, task, node, int(step), now, kind == "exit")
            if kind == "step":
                last = self._steps.get(number)
                if last is not None:
                    self.intervals.append(now - last)
                self._steps[number] = now
                if int(own_us):
                    self._own.add(number, int(step), int(own_us) / 1e6)


def _bound_pair() -> tuple[socket.socket, socket.socket]:
    """A UDP socket for the datagrams and a listening TCP socket for the parents' reach
    checks, on one port number (one address to pass on)."""
    for _ in range(20):
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("", 0))
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            tcp.bind(("", udp.getsockname()[1]))
        except OSError:  # that TCP port is taken: another pair
            udp.close()
            tcp.close()
            continue
        tcp.listen(64)
        return udp, tcp
    raise OSError("no port free for both UDP and TCP")


#: Connects in a row that the supervisor's host leaves unanswered before a rank's
#: ``tfslurm run`` counts itself cut off from the job (a partition) and ends its program.
FENCE_TRIES = 3
#: Seconds between two connects, and the most one may take (:func:`probe.answers`).
FENCE_EVERY_S = 1.0


def cut_off_line(task: str, target: ProgressTarget, silent: float, what: str) -> str:
    """The line a rank's ``tfslurm run`` says when :func:`watch_reach` finds it cut off and
    it ends ``what`` (its program, its server)."""
    return (
        f"tfslurm run: {task}: cut off from the supervisor on {target.host} (no answer for {silent:.1f} s): "
        f"ending {what}, so that nothing of this step runs on"
    )


def watch_reach(target: ProgressTarget, on_cut_off: Callable[[float], None]) -> None:
    """In a thread of a rank's ``tfslurm run``: connect to the supervisor every
    :data:`FENCE_EVERY_S`; after :data:`FENCE_TRIES` unanswered in a row, call
    ``on_cut_off(seconds since the last answer)`` once and return. The supervisor ends the
    step on its side when it finds the node silent; this ends the node's side, so that
    nothing of the old step runs on there (or writes a checkpoint) once the link is back."""
    try:  # once: a lookup that fails in a partition is not an unanswered connect
        host = socket.gethostbyname(target.host)
    except OSError:  # the name does not resolve here: no check is possible
        return
    answered, misses = time.monotonic(), 0
    while misses < FENCE_TRIES:
        start = time.monotonic()
        # a refusal is an answer too: the supervisor has ended, but the network is up
        if answers(host, target.port, FENCE_EVERY_S):
            answered, misses = time.monotonic(), 0
        else:
            misses += 1
        time.sleep(max(0.0, FENCE_EVERY_S - (time.monotonic() - start)))
    on_cut_off(time.monotonic() - answered)
