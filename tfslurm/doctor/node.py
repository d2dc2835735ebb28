"""What one node of the allocation sees: the node side of ``tfslurm doctor``'s step.

Each node's task (one per node) binds its planned port and listens on it, writes a marker
file into the working directory, checks what it can alone (GPUs, frameworks, container,
the hook's wrapper), and tells the gathering point (:mod:`tfslurm.doctor.gather`) over one
TCP connection, one JSON object a line:

    node -> {"hello": NODE, "facts": {...}}       gatherer -> {"ping": 1}
    node -> {"time": T}                            (the gatherer compares clocks)
    gatherer -> {"go": 1}                          every node listens and wrote its marker
    node -> {"report": {...}}                      names resolved, ports reached, markers seen
    gatherer -> {"done": 1}                        every node reported: stop listening

The checks that need nothing but this node's data are pure functions here
(:func:`gpu_findings`, :func:`missing_variables`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

from tfslurm.doctor.findings import Finding
from tfslurm.errors import ContainerError, clip
from tfslurm.runtime.container import container_prefix, container_start
from tfslurm.runtime.probe import connect
from tfslurm.value import Value

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, Final

    from tfslurm.step import GpuVariables

#: The frameworks ``--framework`` may name, and the module each imports.
FRAMEWORKS = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch", "keras": "keras"}
#: Seconds a node keeps trying to connect to a peer's planned port. A live peer's kernel
#: answers at once, but 32 nodes starting at once on a loaded machine lost connects (an
#: ARP request or a SYN dropped, retried by the kernel only a second later): tries are
#: repeated until this deadline.
REACH_TIMEOUT_S = 5.0
#: Seconds between two tries of a connect that was refused or failed at once.
RETRY_S = 0.2
#: Seconds a node keeps looking for the others' marker files (a network file system may
#: show another node's new file only after its attribute cache expires).
MARKER_WAIT_S = 3.0
#: Seconds an import of a framework, or the container's start, may take.
PROGRAM_TIMEOUT_S = 120.0
MARKER_PREFIX = ".tfslurm-doctor-"
_NO_DEVICES = ("", "NoDevFiles", "none", "-1")


class NodeCheck(Value):
    """What one node's task checks, as its entry point read it."""

    __slots__ = (
        "container",
        "cwd",
        "env",
        "frameworks",
        "gather",
        "gpus",
        "host",
        "marker",
        "node",
        "peers",
        "port",
        "python",
    )
    __match_args__ = ("node", "host", "port", "peers", "gather", "marker")

    def __init__(
        self,
        *,
        node: str,
        host: str,
        port: int,
        peers: Sequence[tuple[str, str, int]],
        gather: tuple[str, int],
        marker: str,
        gpus: GpuVariables,
        frameworks: Sequence[str] = (),
        container: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str = ".",
        python: str = "python3",
    ) -> None:
        self.node: Final = node
        self.host: Final = host  # this node's planned host name
        self.port: Final = port  # ... and port
        self.peers: Final = tuple(peers)  # (node, host, port) of every other node
        self.gather: Final = gather  # the gathering point's (host, port)
        self.marker: Final = marker  # marker file name stem: MARKER_PREFIX + job.step + '-'
        self.gpus: Final = gpus
        self.frameworks: Final = tuple(frameworks)
        self.container: Final = container  # TFSLURM_CONTAINER, as set
        self.env: Final[Mapping[str, str]] = dict(env or {})  # what the program would run with
        self.cwd: Final = cwd
        self.python: Final = python


# ------------------------------------------------------------------ pure decisions
def device_ids(value: str | None) -> tuple[str, ...] | None:
    """The ids of a device list (``0,1``); () for none (unset counts as None)."""
    if value is None:
        return None
    value = value.strip()
    return () if value in _NO_DEVICES else tuple(v.strip() for v in value.split(",") if v.strip())


def gpu_findings(node: str, gpus: GpuVariables) -> tuple[list[Finding], str]:
    """CUDA_VISIBLE_DEVICES against the GPUs Slurm gave the step on this node: findings and
    what was checked. Ids may be Slurm's (no device cgroup) or renumbered from 0 (with
    ``ConstrainDevices``): either form of the same count is Slurm's."""
    cuda = gpus.value("CUDA_VISIBLE_DEVICES")
    visible = device_ids(cuda)
    given = device_ids(gpus.step_gpus if gpus.step_gpus is not None else gpus.job_gpus)
    on_node = (gpus.gpus_on_node or "").strip()
    count = int(on_node) if on_node.isascii() and on_node.isdigit() else None
    if count is None and given is not None:
        count = len(given)
    if not count:
        if visible:
            message = f"CUDA_VISIBLE_DEVICES={cuda} but Slurm gave this job no GPUs here (set by the submitting shell or the job script?)"
            fix = (
                "unset CUDA_VISIBLE_DEVICES before submitting, or ask Slurm for the GPUs (--gpus-per-node=N)"
            )
            return [Finding("gpus", [node], message, fix)], "gpus"
        return [], "gpus (none given, none visible)"
    fix = "let Slurm set CUDA_VISIBLE_DEVICES: do not set or unset it in the job script or a prolog, and check gres.conf"
    if visible is None:
        return [
            Finding("gpus", [node], f"Slurm gave {count} GPU(s) here but CUDA_VISIBLE_DEVICES is unset", fix)
        ], "gpus"
    renumbered = tuple(str(i) for i in range(count))
    if visible != given and visible != renumbered:
        shown = ",".join(given) if given else f"{count} GPU(s)"
        message = f"CUDA_VISIBLE_DEVICES={cuda} but Slurm gave {shown} here"
        return [Finding("gpus", [node], message, fix)], "gpus"
    return [], f"gpus ({count} per node, as Slurm gave)"


def missing_variables(expected: Sequence[str], printed: str) -> list[str]:
    """The names of ``expected`` that ``env``'s output (``NAME=value`` lines) lacks."""
    seen = {line.split("=", 1)[0] for line in printed.splitlines() if "=" in line}
    return [name for name in expected if name not in seen]


# ------------------------------------------------------------------ checks on this node
def _run(
    argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None
) -> tuple[int, str, str]:
    try:
        done = subprocess.run(
            list(argv),
            env=None if env is None else dict(env),
            cwd=cwd,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PROGRAM_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, "", str(exc)
    return done.returncode, done.stdout, done.stderr


def _last_line(text: str, status: int) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return clip(lines[-1], 200) if lines else f"exit status {status}"


def framework_findings(check: NodeCheck, run: Callable[..., tuple[int, str, str]] = _run) -> list[Finding]:
    """Each framework asked for, imported in a Python of its own (a crash stays there)."""
    found = []
    for name in check.frameworks:
        status, _, err = run([check.python, "-c", f"import {FRAMEWORKS[name]}"], env=check.env, cwd=check.cwd)
        if status != 0:
            message = f"import {FRAMEWORKS[name]} fails in {check.python}: {_last_line(err, status)}"
            fix = f"install {name} into that Python on these nodes, or load its module in the job script"
            found.append(Finding("framework", [check.node], message, fix))
    return found


def container_findings(
    check: NodeCheck, expected: Sequence[str], run: Callable[..., tuple[int, str, str]] = _run
) -> list[Finding]:
    """``env`` run in the container of ``TFSLURM_CONTAINER`` the way ``tfslurm run`` starts
    a program there: the plan's variables must reach it."""
    if not check.container:
        return []
    shown = clip(check.container, 80)
    try:
        start = container_start(container_prefix(check.container), ["env"], check.env, check.cwd)
    except ContainerError as exc:
        return [Finding("container", [check.node], str(exc), "set TFSLURM_CONTAINER to a command prefix")]
    status, out, err = run(start.argv, env=start.env, cwd=check.cwd)
    if status != 0:
        message = f"TFSLURM_CONTAINER={shown!r} cannot run env: {_last_line(err or out, status)}"
        return [Finding("container", [check.node], message, "check the image and the runtime on these nodes")]
    missing = missing_variables(expected, out)
    if missing:
        message = f"TFSLURM_CONTAINER={shown!r} does not pass {', '.join(missing)} into the container"
        fix = "let the runtime pass the environment on (podman: -e NAME; ch-run passes it), or use ch-run or podman, which tfslurm run completes itself"
        return [Finding("container", [check.node], message, fix)]
    return []


def bind(port: int) -> tuple[socket.socket | None, str]:
    """A socket listening on ``port`` of every address, or None and why not."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("0.0.0.0", port))
        server.listen(128)
    except OSError as exc:
        server.close()
        return None, exc.strerror or str(exc)
    return server, ""


def resolves(host: str) -> bool:
    try:
        return bool(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM))
    except (OSError, UnicodeError):
        return False


def _answer(server: socket.socket, stop: threading.Event) -> None:
    server.settimeout(0.2)
    while not stop.is_set():
        try:
            server.accept()[0].close()
        except OSError:
            continue


def peer_report(check: NodeCheck) -> dict[str, list[str]]:
    """Which peers' names did not resolve, which planned ports did not answer, whose
    marker files this node saw (its own too)."""
    unresolved = [node for node, host, _ in check.peers if not resolves(host)]
    unreached: list[str] = []

    def knock(node: str, host: str, port: int) -> None:
        if not reaches(host, port, REACH_TIMEOUT_S):
            unreached.append(node)

    threads = [
        threading.Thread(target=knock, args=peer, daemon=True)
        for peer in check.peers
        if peer[0] not in unresolved
    ]
    for thread in threads:
        thread.start()
    seen = _markers_seen(check)
    for thread in threads:
        thread.join(REACH_TIMEOUT_S + 5)
    return {"unresolved": unresolved, "unreached": sorted(unreached), "seen": seen}


def reaches(host: str, port: int, limit: float) -> bool:
    """Whether a connect to ``host:port`` succeeds within ``limit`` s, tries repeated."""
    deadline = time.monotonic() + limit
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if connect(host, port, left) is True:
            return True
        time.sleep(min(RETRY_S, max(0.0, deadline - time.monotonic())))


def _markers_seen(check: NodeCheck) -> list[str]:
    nodes = [check.node, *(node for node, _, _ in check.peers)]
    deadline = time.monotonic() + MARKER_WAIT_S
    while True:
        seen = [n for n in nodes if os.path.exists(os.path.join(check.cwd, check.marker + n))]
        if len(seen) == len(nodes) or time.monotonic() >= deadline:
            return seen
        time.sleep(0.2)


def run_node(
    check: NodeCheck, expected: Sequence[str], wrappers: Callable[[], tuple[list[Finding], list[str]]]
) -> int:
    """This node's part of the step: 0 once the gathering point said done."""
    server, port_error = bind(check.port)
    stop = threading.Event()
    if server is not None:
        threading.Thread(target=_answer, args=(server, stop), daemon=True).start()
    marker = os.path.join(check.cwd, check.marker + check.node)
    try:
        with open(marker, "w", encoding="utf-8") as f:
            f.write(check.node + "\n")
        marker_error = ""
    except OSError as exc:
        marker_error = exc.strerror or str(exc)
    findings, checked = gpu_findings(check.node, check.gpus)
    findings += framework_findings(check) + container_findings(check, expected)
    wrapper_findings, wrapper_checked = wrappers()
    findings += wrapper_findings
    facts: dict[str, Any] = {
        "host": check.host,
        "port": check.port,
        "port_error": port_error,
        "cwd": check.cwd,
        "marker_error": marker_error,
        "findings": [f.as_dict() for f in findings],
        "checked": [checked, *wrapper_checked],
    }
    try:
        return _talk(check, facts)
    except (OSError, ValueError) as exc:  # said in srun's output, which the doctor quotes
        host, port = check.gather
        print(f"tfslurm doctor: {check.node} lost the gathering point {host}:{port}: {exc}", file=sys.stderr)
        return 1
    finally:
        stop.set()
        if server is not None:
            server.close()
        if not marker_error:
            try:
                os.unlink(marker)
            except OSError:
                pass


def _talk(check: NodeCheck, facts: dict[str, Any]) -> int:
    with socket.create_connection(check.gather, timeout=30) as conn, conn.makefile("rwb") as stream:
        conn.settimeout(None)

        def send(message: dict[str, Any]) -> None:
            stream.write(json.dumps(message).encode() + b"\n")
            stream.flush()

        send({"hello": check.node, "facts": facts})
        for line in stream:
            message = json.loads(line)
            if "ping" in message:
                send({"time": time.time()})
            elif "go" in message:
                send({"report": peer_report(check)})
            elif "done" in message:
                return 0
    return 1
