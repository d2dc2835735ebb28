"""The gathering point of ``tfslurm doctor``'s step, and the decisions over all nodes.

In an allocation (a salloc shell, a batch script) the doctor listens on a TCP port of its
own host, starts one short step with one task per node (``srun ... tfslurm doctor
--node-check HOST:PORT``, :mod:`tfslurm.doctor.node`), and holds the nodes in step: each
says hello with its facts and answers a ping with its clock, all are told to go once every
node listens on its planned port and wrote its marker, and all are told they are done once
every node reported what it reached. :func:`step_report` turns the replies into findings;
it is a pure function of them.

A node's clock is compared with this host's: the node's time, read between the ping's
send and its answer's arrival, is off by more than the limit only when it is outside
that window widened by the limit, so a slow network never makes a clock look wrong.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from typing import TYPE_CHECKING

from tfslurm.doctor.findings import Finding, Report, node_list

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, Final

#: Clocks may differ by this many seconds (Slurm's credentials and TF's timeouts tolerate it).
CLOCK_LIMIT_S = 1.0
#: Seconds the nodes have to start and say hello (a step's start, Python's, the imports).
HELLO_TIMEOUT_S = 120.0
#: Seconds the nodes have to report, after go (connects, markers).
REPORT_TIMEOUT_S = 30.0
# srun's line for a task that ended badly: its node, which will not report
_TASK_ENDED = re.compile(r"^srun: error: (\S+): tasks? [\d,-]+: ")
REACH_FIX = "open the planned ports between the nodes (firewall), check each node's link on the network the plan's host names are on"


class Reply:
    """What one node said: its facts, its clock's offset and the window of that reading,
    its report (None: it never reported)."""

    __slots__ = ("facts", "offset", "report", "window")

    def __init__(
        self,
        facts: Mapping[str, Any],
        offset: float = 0.0,
        window: float = 0.0,
        report: Mapping[str, Any] | None = None,
    ) -> None:
        self.facts: Final = facts
        self.offset = offset
        self.window = window
        self.report = report


class Gathering:
    """Listens for the nodes and holds them in step (the protocol of :mod:`tfslurm.doctor.node`)."""

    def __init__(self, nodes: Sequence[str], host: str) -> None:
        self.nodes = tuple(nodes)
        self.host = host
        self.replies: dict[str, Reply] = {}
        self.gone: set[str] = set()  # nodes whose task ended (srun said so)
        self.changed = threading.Condition()
        self.go = threading.Event()
        self.done = threading.Event()
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.bind(("0.0.0.0", 0))
        self.server.listen(max(128, len(self.nodes)))
        self.port: int = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as stream:

            def send(message: dict[str, Any]) -> None:
                stream.write(json.dumps(message).encode() + b"\n")
                stream.flush()

            def receive() -> dict[str, Any]:
                line = stream.readline()
                if not line:
                    raise ConnectionError("the node hung up")
                message = json.loads(line)
                if not isinstance(message, dict):
                    raise ConnectionError("not a message")
                return message

            try:
                hello = receive()
                node = str(hello.get("hello"))
                given = hello.get("facts")
                facts: dict[str, Any] = given if isinstance(given, dict) else {}
                sent = time.time()
                send({"ping": 1})
                answer = float(receive()["time"])
                back = time.time()
                reply = Reply(facts, offset=answer - (sent + back) / 2, window=(back - sent) / 2)
                with self.changed:
                    self.replies[node] = reply
                    self.changed.notify_all()
                self.go.wait()
                send({"go": 1})
                report = receive().get("report")
                with self.changed:
                    reply.report = report if isinstance(report, dict) else {}
                    self.changed.notify_all()
                self.done.wait()
                send({"done": 1})
            except (OSError, ValueError, KeyError, TypeError, ConnectionError):
                return

    def _wait(self, ready: Any, until: float, proc: subprocess.Popen[str] | None) -> None:
        with self.changed:
            while not ready() and time.monotonic() < until and (proc is None or proc.poll() is None):
                self.changed.wait(0.1)

    def _read(self, proc: subprocess.Popen[str], output: list[str]) -> None:
        for line in proc.stdout or ():
            output.append(line)
            ended = _TASK_ENDED.match(line)
            if ended:
                with self.changed:
                    self.gone.add(ended.group(1))
                    self.changed.notify_all()

    def run(self, argv: Sequence[str], env: Mapping[str, str], hello_s: float, report_s: float) -> str:
        """Start the step ``argv`` and hold its nodes in step; the tail of its output."""
        proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        output: list[str] = []
        reader = threading.Thread(target=self._read, args=(proc, output), daemon=True)
        reader.start()
        try:
            # a node whose task ended will not say hello: waiting for it would cost the timeout
            self._wait(
                lambda: len(self.gone | set(self.replies)) >= len(self.nodes),
                time.monotonic() + hello_s,
                proc,
            )
            self.go.set()
            self._wait(
                lambda: all(r.report is not None or n in self.gone for n, r in self.replies.items()),
                time.monotonic() + report_s,
                proc,
            )
            self.done.set()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.terminate()  # srun cancels the step on SIGTERM
                proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            self.server.close()
        reader.join(5)
        return "".join(output[-20:])


# ------------------------------------------------------------------ the decisions (pure)
def step_report(
    nodes: Sequence[str], replies: Mapping[str, Reply], where: str, srun_tail: str = ""
) -> Report:
    """The findings of one step over ``nodes``: ``replies`` by node, ``where`` the gathering
    point (``host:port``), ``srun_tail`` the end of srun's output (said for nodes that never
    reported)."""
    findings: list[Finding] = []
    missing = [n for n in nodes if n not in replies]
    if missing:
        tail = [line.strip() for line in srun_tail.splitlines() if line.strip()]
        errors = [line for line in tail if line.startswith("srun:") or "error" in line.lower()]
        said = f" (srun: {(errors or tail)[-1]})" if tail else ""
        findings.append(
            Finding(
                "node",
                missing,
                f"its doctor task did not report to the gathering point {where}{said}",
                f"check the node (sinfo -n NODE, scontrol show node), that it reaches {where.rsplit(':', 1)[0]}, and that tfslurm's Python is there",
            )
        )
    present = [n for n in nodes if n in replies]
    for node in present:
        facts = replies[node].facts
        findings += [Finding.from_dict(f) for f in facts.get("findings", ()) if isinstance(f, dict)]
        if facts.get("port_error"):
            port = facts.get("port")
            message = f"the planned port {port} cannot be bound: {facts['port_error']}"
            fix = f"stop the program listening there (ss -ltnp 'sport = :{port}'), or move tfslurm's ports (MpiParams=ports in slurm.conf, or TFSLURM_PORT_BASE)"
            findings.append(Finding("port", [node], message, fix))
        if facts.get("marker_error"):
            message = f"cannot write into the working directory {facts.get('cwd')}: {facts['marker_error']}"
            findings.append(
                Finding(
                    "cwd", [node], message, "run from a directory every node can write (sbatch --chdir=DIR)"
                )
            )
    reported = [n for n in present if replies[n].report is not None]
    findings += name_findings(reported, replies)
    findings += reach_findings(reported, replies)
    findings += clock_findings(present, replies, where.rsplit(":", 1)[0])
    findings += cwd_findings(reported, replies)
    checked = [f"{node_list(having)}: {c}" for c, having in _node_checked(present, replies).items()]
    if reported:
        checked += [
            f"{node_list(reported)}: names resolve, planned ports free and reached, clocks within {CLOCK_LIMIT_S:g} s, working directory shared"
        ]
    return Report(findings, checked)


def _node_checked(present: Sequence[str], replies: Mapping[str, Reply]) -> dict[str, list[str]]:
    """Each check a node said it made -> the nodes that said it."""
    having: dict[str, list[str]] = {}
    for node in present:
        for check in replies[node].facts.get("checked", ()):
            if isinstance(check, str):
                having.setdefault(check, []).append(node)
    return having


def _report(replies: Mapping[str, Reply], node: str, key: str) -> list[str]:
    report = replies[node].report or {}
    values = report.get(key, [])
    return [str(v) for v in values] if isinstance(values, list) else []


def name_findings(reported: Sequence[str], replies: Mapping[str, Reply]) -> list[Finding]:
    """Planned host names that do not resolve: a name no other node resolves is the name's
    fault (one line for all such); a name only some nodes cannot resolve is theirs."""
    failing: dict[str, list[str]] = {}
    for source in reported:
        for peer in _report(replies, source, "unresolved"):
            failing.setdefault(peer, []).append(source)
    nowhere = [
        p for p in reported if p in failing and len(reported) > 1 and set(failing[p]) >= set(reported) - {p}
    ]
    found = []
    if nowhere:
        hosts = ", ".join(str(replies[p].facts.get("host", p)) for p in nowhere if p in replies)
        message = f"the planned host names ({hosts}) resolve on no other node"
        fix = "set TFSLURM_HOST_TEMPLATE (or the plugin's host_template=) to names the nodes resolve, or add them to DNS"
        found.append(Finding("name", nowhere, message, fix))
    by_source: dict[str, list[str]] = {}
    for peer, sources in failing.items():
        if peer not in nowhere:
            for source in sources:
                by_source.setdefault(source, []).append(peer)
    for source, peers in by_source.items():
        hosts = ", ".join(str(replies[p].facts.get("host", p)) if p in replies else p for p in peers)
        message = f"does not resolve {hosts} (the planned host of {node_list(peers)})"
        found.append(Finding("name", [source], message, "add the names to this node's DNS or /etc/hosts"))
    return found


def reach_findings(reported: Sequence[str], replies: Mapping[str, Reply]) -> list[Finding]:
    """Planned ports that did not answer. Pairs whose name did not resolve, or whose target
    could not bind its port, are said by those checks; a node that reaches none and that
    none reaches is one line, not one per pair."""
    bound = {n for n in reported if not replies[n].facts.get("port_error")}
    pairs: dict[tuple[str, str], bool] = {}
    for source in reported:
        unresolved = set(_report(replies, source, "unresolved"))
        unreached = set(_report(replies, source, "unreached"))
        for target in reported:
            if target != source and target in bound and target not in unresolved:
                pairs[(source, target)] = target not in unreached
    if not pairs or all(pairs.values()):
        return []
    if not any(pairs.values()):
        return [Finding("reach", list(reported), "no node reaches another at its planned port", REACH_FIX)]
    cut = [
        n
        for n in reported
        if any(n in pair for pair in pairs) and not any(ok for pair, ok in pairs.items() if n in pair)
    ]
    found = []
    if cut:
        message = "reaches no other node at its planned port, and no other node reaches it"
        found.append(Finding("reach", cut, message, REACH_FIX))
    by_target: dict[str, list[str]] = {}
    for (source, target), ok in pairs.items():
        if not ok and source not in cut and target not in cut:
            by_target.setdefault(target, []).append(source)
    for target, sources in by_target.items():
        facts = replies[target].facts
        message = f"{facts.get('host')}:{facts.get('port')} does not answer from {node_list(sources)}"
        found.append(Finding("reach", [target], message, REACH_FIX))
    return found


def clock_findings(present: Sequence[str], replies: Mapping[str, Reply], host: str) -> list[Finding]:
    """Nodes whose clock is off by more than :data:`CLOCK_LIMIT_S`, beyond the reading's window."""
    found = []
    for node in present:
        reply = replies[node]
        if abs(reply.offset) > CLOCK_LIMIT_S + reply.window:
            way = "ahead of" if reply.offset > 0 else "behind"
            message = f"the clock is {abs(reply.offset):.1f} s {way} {host}'s"
            fix = "synchronise the clocks (chrony or ntpd on every node): Slurm's credentials and the training's timeouts rely on them"
            found.append(Finding("clock", [node], message, fix))
    return found


def cwd_findings(reported: Sequence[str], replies: Mapping[str, Reply]) -> list[Finding]:
    """Nodes outside the largest group of nodes that see each other's files."""
    seen = {n: set(_report(replies, n, "seen")) for n in reported}
    groups: list[list[str]] = []
    for node in reported:
        for group in groups:
            if all(node in seen[g] and g in seen[node] for g in group):
                group.append(node)
                break
        else:
            groups.append([node])
    if len(groups) < 2:
        return []
    main = max(groups, key=len)
    outside = [n for n in reported if n not in main]
    cwd = replies[main[0]].facts.get("cwd")
    if len(main) == 1:
        message = f"the working directory {cwd} is not shared: no node sees a file another node wrote there"
        outside = list(reported)
    else:
        message = f"the working directory {cwd} is not the one {node_list(main)} share: a file written there is not seen by the others"
    fix = "run from a directory on a file system every node mounts (home or project directory), or sbatch --chdir=DIR"
    return [Finding("cwd", outside, message, fix)]
