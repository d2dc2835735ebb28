"""Watching other tasks' gRPC ports: missing peers, and the chief finishing.

TensorFlow gives no error when a peer never starts: MultiWorkerMirroredStrategy and
ParameterServerStrategy block for 150 s or more in silence. A TF server listens on its
``host:port`` as soon as it exists, so a TCP connect tells whether a peer is up; that is all
tfslurm needs to (a) fail with a clear message after a timeout and (b) let ps/worker servers
notice that the chief has finished (its port was open and is now refused).

Only the standard library; no TensorFlow.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence

from tfslurm.errors import one_line
from tfslurm.plan import TaskPlan
from tfslurm.runtime.probe import connect
from tfslurm.runtime.roles import Role

PROBE_INTERVAL = 0.25


def is_listening(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    return connect(host, port, timeout) is True


def is_refused(host: str, port: int, timeout: float = 1.0) -> bool:
    """True only for a definite "nobody listens here" (not for a timeout or DNS hiccup)."""
    return connect(host, port, timeout) is False


class PeerWatch:
    """Fail with a clear message when peers do not come up in time.

    The clock starts when ``own_port`` accepts connections (this task's TF server exists,
    i.e. it is now waiting for the others), or at once when ``own_port`` is None. Every peer
    seen listening once counts as up. ``on_timeout(missing)`` is called once if some peer is
    still unseen after ``timeout`` seconds.
    """

    __slots__ = ("_stop", "all_seen", "interval", "missing", "on_timeout", "own_port", "peers", "timeout")

    def __init__(
        self,
        peers: Sequence[TaskPlan],
        timeout: float,
        on_timeout: Callable[[list[TaskPlan], float], None],
        own_port: int | None = None,
        interval: float = PROBE_INTERVAL,
    ) -> None:
        self.peers = peers
        self.timeout = timeout
        self.on_timeout = on_timeout
        self.own_port = own_port
        self.interval = interval
        self.all_seen = threading.Event()
        self.missing: list[TaskPlan] = list(peers)
        self._stop = threading.Event()

    def start(self) -> PeerWatch:
        threading.Thread(target=self._loop, name="tfslurm-peer-watch", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        if self.own_port is not None:
            while not is_listening("127.0.0.1", self.own_port, timeout=0.5):
                if self._stop.wait(self.interval):
                    return
        started = time.monotonic()
        while self.missing:
            self.missing = [p for p in self.missing if not is_listening(p.host, p.port, 0.5)]
            if not self.missing:
                break
            waited = time.monotonic() - started
            if waited > self.timeout:
                self.on_timeout(list(self.missing), waited)
                return
            if self._stop.wait(self.interval):
                return
        self.all_seen.set()


def missing_peer_message(role_text: str, missing: list[TaskPlan], waited: float) -> str:
    names = ", ".join(str(a) for a in missing[:8])
    more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
    return one_line(
        f"tfslurm run: error: {role_text}: peer {names}{more} did not come up within "
        f"{waited:.0f} s (TFSLURM_PEER_TIMEOUT / --peer-timeout); check that task's output "
        "for why it did not start, or raise the timeout if startup is just slow",
        1000,
    )


def watch_spec(role: Role) -> tuple[list[TaskPlan], int | None]:
    """(peers this task waits for, own port that starts the clock or None). A TF server
    (ps, PSS worker) waits for its chief; the evaluator waits for nobody (its chief may have
    finished already: ``ChiefWatch``); a PSS chief for every ps and worker; an MWMS task,
    once its own server is up, for every other chief and worker."""
    if role.is_server:
        return [role.chief], None
    if role.job == "evaluator":
        return [], None
    if role.strategy == "ps":
        return role.addresses(("ps", "worker")), None
    me = role.address()
    return [a for a in role.addresses(("chief", "worker")) if a != me], me.port


def wait_for_peers(role: Role, timeout: float, on_missing: Callable[[], None]) -> PeerWatch | None:
    """The one way a task waits for its peers (:func:`watch_spec`): when one is not up
    within ``timeout`` seconds, print the one-line error, then call ``on_missing`` (end the
    program or this process: TF, blocked inside C++ while it waits, cannot be interrupted
    otherwise). The started watch, or None when this task waits for nobody."""
    peers, own = watch_spec(role)
    if not peers:
        return None

    def on_timeout(missing: list[TaskPlan], waited: float) -> None:
        print(missing_peer_message(role.describe(), missing, waited), file=sys.stderr, flush=True)
        on_missing()

    return PeerWatch(peers, timeout, on_timeout, own).start()


class ChiefWatch:
    """Track the chief's port: *finished* means it was up and then refused ``refusals``
    times in a row. A chief never seen within ``timeout`` is reported by ``on_timeout``."""

    __slots__ = (
        "_stop",
        "chief",
        "finished",
        "interval",
        "on_finished",
        "on_timeout",
        "refusals",
        "seen",
        "timeout",
    )

    def __init__(
        self,
        chief: TaskPlan,
        timeout: float | None = None,
        on_finished: Callable[[], None] | None = None,
        on_timeout: Callable[[list[TaskPlan], float], None] | None = None,
        refusals: int = 2,
        interval: float = PROBE_INTERVAL,
    ) -> None:
        self.chief = chief
        self.timeout = timeout
        self.on_finished = on_finished
        self.on_timeout = on_timeout
        self.refusals = refusals
        self.interval = interval
        self.seen = threading.Event()
        self.finished = threading.Event()
        self._stop = threading.Event()

    def start(self) -> ChiefWatch:
        threading.Thread(target=self._loop, name="tfslurm-chief-watch", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        started = time.monotonic()
        refused = 0
        while not self._stop.is_set():
            host, port = self.chief.host, self.chief.port
            if not self.seen.is_set():
                if is_listening(host, port, 0.5):
                    self.seen.set()
                elif self.timeout is not None and time.monotonic() - started > self.timeout:
                    if self.on_timeout is not None:
                        self.on_timeout([self.chief], time.monotonic() - started)
                    return
            elif is_refused(host, port, 0.5):
                refused += 1
                if refused >= self.refusals:
                    self.finished.set()
                    if self.on_finished is not None:
                        self.on_finished()
                    return
            else:
                refused = 0
            self._stop.wait(self.interval)
