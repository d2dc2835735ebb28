"""Is a node of the step still there? ``tfslurm supervise`` asks the nodes themselves.

A node that dies silently (power lost, link down, kernel panic) is listed by Slurm as up,
then NOT_RESPONDING, and DOWN only ``SlurmdTimeout`` plus ping rounds later (about 480 s
with the default 300 s on 22.05): until then srun waits for its tasks and the step hangs.
The supervisor does not wait for that: when the step shows trouble it opens a TCP
connection to each node's slurmd (``SlurmdPort``, the port srun itself uses to reach the
node). A live node answers (accepts, or refuses when its slurmd is gone but the kernel is
there); a dead one drops the packets and the connection times out. A node is silent only
when none of several tries answered, and only when another node answered in the same
probe: a probe from a supervisor whose own network is gone says nothing.

:func:`silent_nodes` and :func:`probe_due` are the pure decisions; :class:`Prober` knocks.
"""

from __future__ import annotations

import re
import socket
import threading
from typing import TYPE_CHECKING

from tfslurm.value import Value

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Final

#: Slurm's default ``SlurmdPort``.
DEFAULT_SLURMD_PORT = 6818
#: Seconds a try waits for the connection: a live node's kernel answers a connect on the
#: cluster network in well under a millisecond, whatever its processes are doing.
KNOCK_TIMEOUT_S = 1.0
#: Tries per node and probe; a node is silent when none answered.
KNOCK_TRIES = 2
#: Seconds without a step line, after the step printed one, before the nodes are probed
#: (an MWMS step waits for every worker: a dead one stops the step lines of all).
QUIET_S = 2.0
#: Seconds between two probes while the trouble lasts (a long checkpoint save, a slow
#: phase: the nodes answer and nothing else happens).
PROBE_EVERY_S = 3.0

# srun's own lines when a task ended badly or it ends the step: worth a probe
TROUBLE = re.compile(rb"^srun: error: |Terminating StepId|Communication connection failure")
_PORT = re.compile(r"^\s*SlurmdPort\s*=\s*(\d+)\s*(?:#.*)?$", re.IGNORECASE | re.MULTILINE)


def slurmd_port(conf_text: str | None) -> int:
    """``SlurmdPort`` of a slurm.conf's text (None: not readable here, a configless site
    without a cached copy), else Slurm's default."""
    found = _PORT.search(conf_text or "")
    port = int(found.group(1)) if found else 0
    return port if 0 < port < 65536 else DEFAULT_SLURMD_PORT


def read_conf(path: str | None) -> str | None:
    """The text of the slurm.conf at ``path`` (None, or not readable: None)."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def silent_nodes(replies: Mapping[str, Sequence[bool]]) -> tuple[str, ...]:
    """The nodes none of whose tries answered, in ``replies``' order; none at all when no
    node answered (the prober itself is cut off: nothing can be said of the others)."""
    if not any(any(tries) for tries in replies.values()):
        return ()
    return tuple(node for node, tries in replies.items() if not any(tries))


def probe_due(
    now: float, last_line: float | None, trouble: bool, last_probe: float | None, quiet: float, every: float
) -> bool:
    """Whether to probe the nodes now: the step showed trouble (srun reported a task's
    failure) or has printed no step line for ``quiet`` s since its last one (``last_line``
    None: none yet, start-up is not a trouble), and the last probe is ``every`` s old."""
    if last_probe is not None and now - last_probe < every:
        return False
    return trouble or (last_line is not None and now - last_line >= quiet)


class Prober(Value):
    """Knocks at ``port`` of each node, ``tries`` times at most, ``timeout`` s each."""

    __slots__ = ("every", "port", "quiet", "timeout", "tries")
    __match_args__ = ("port", "timeout", "tries", "quiet", "every")

    def __init__(
        self,
        port: int = DEFAULT_SLURMD_PORT,
        timeout: float = KNOCK_TIMEOUT_S,
        tries: int = KNOCK_TRIES,
        quiet: float = QUIET_S,
        every: float = PROBE_EVERY_S,
    ) -> None:
        self.port: Final = port
        self.timeout: Final = timeout
        self.tries: Final = tries
        self.quiet: Final = quiet
        self.every: Final = every

    def knock(self, node: str) -> list[bool]:
        """One node's tries, up to the first that answered."""
        tries: list[bool] = []
        while len(tries) < self.tries and not any(tries):
            tries.append(answers(node, self.port, self.timeout))
        return tries

    def replies(self, nodes: Sequence[str]) -> dict[str, list[bool]]:
        """Every node's tries, all nodes at once (a probe lasts at most tries x timeout)."""
        found: dict[str, list[bool]] = {node: [] for node in nodes}

        def knock(node: str) -> None:
            found[node] = self.knock(node)

        threads = [threading.Thread(target=knock, args=(n,), daemon=True) for n in found]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(self.timeout * self.tries + 5)
        return found

    def silent(self, nodes: Sequence[str]) -> tuple[str, ...]:
        """The nodes of ``nodes`` that did not answer (:func:`silent_nodes`)."""
        return silent_nodes(self.replies(nodes))

    def describe(self) -> str:
        return f"slurmd port {self.port}, {self.tries} tries of {self.timeout:g} s"


def connect(host: str, port: int, timeout: float) -> bool | None:
    """A TCP connect to ``host:port``: True, something accepts; False, definitely refused;
    None, no answer within ``timeout`` s (dropped packets, an unreachable host, a name that
    does not resolve). ``[v6addr]`` (TF's IPv6 form) is unbracketed."""
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except ConnectionRefusedError:
        return False
    except OSError:
        return None


def answers(host: str, port: int, timeout: float) -> bool:
    """Whether ``host``'s kernel answered a connect to ``port`` within ``timeout`` s: it
    accepted or refused."""
    return connect(host, port, timeout) is not None
