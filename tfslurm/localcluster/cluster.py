"""``LocalCluster``: a real multi-node Slurm 22.05 cluster on this one machine.

One slurmctld in the caller's namespaces and one slurmd per node, each node in its own
network/UTS/mount namespaces (see ``netns``). Everything lives in a state dir; every Slurm
command is pointed at it through ``SLURM_CONF``. Used by the test suite (tests/conftest.py),
by ``tfslurm cluster up|down|status`` and by ``tfslurm demo``::

    with LocalCluster(ClusterConfig(num_nodes=2)) as cluster:
        print(cluster.srun("-N2", "hostname").stdout)

Several clusters run side by side (one per test session), so every resource outside the
state dir (bridge, veths, /24 subnet, controller port) is derived from the state dir and
checked free under a host-wide lock, and stopping touches only PIDs this cluster recorded.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tfslurm.errors import ClusterConfigError, ClusterError, ClusterTimeout
from tfslurm.localcluster import procs
from tfslurm.localcluster.config import ClusterConfig
from tfslurm.localcluster.host import HostLock, clean_environ, free_port, missing_requirements
from tfslurm.localcluster.netns import Network, choose_subnet, choose_tag, subnet_free
from tfslurm.localcluster.slurmconf import StateFiles, gres_conf, plugstack_conf, slurm_conf

TEMP_PREFIX = "tfslurm-cluster-"  # temporary state dirs: /tmp/tfslurm-cluster-XXXXXXXX
STOPPED_CONF = (
    "# This local test cluster was stopped (tfslurm cluster down); the key below makes\n"
    "# every Slurm command fail at once. Its last configuration is slurm.conf.stopped.\n"
    "TfslurmClusterStopped=yes\n"
)
TERMINAL_STATES = {
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
    "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT",
}  # fmt: skip


class LocalCluster:
    """A throwaway Slurm cluster. ``start()``/``stop()`` or use it as a context manager."""

    def __init__(self, config: ClusterConfig | None = None, **options: Any) -> None:
        if config is None:
            config = ClusterConfig.from_options(**options)
        elif options:
            config = config.with_options(**options)
        self.config = config
        self._state_dir = os.path.normpath(config.state_dir) if config.state_dir else None
        self.ephemeral = config.state_dir is None  # a temporary state dir, removed on stop
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._records: list[procs.ProcessRecord] = []
        self._network: Network | None = None
        self._ctld_port: int | None = None
        self._controller_host = socket.gethostname().split(".")[0]
        self._active = False
        self._owner: tuple[int | None, int | None] = (os.getpid(), procs.start_time(os.getpid()))
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------ properties
    @property
    def state_dir(self) -> str:
        if self._state_dir is None:
            raise ClusterError("cluster not started yet: it has no state dir")
        return self._state_dir

    @property
    def files(self) -> StateFiles:
        return StateFiles(self.state_dir)

    @property
    def slurm_conf(self) -> str:
        return self.files.slurm_conf

    @property
    def nodes(self) -> list[str]:
        return self.config.node_names()

    @property
    def subnet(self) -> str | None:
        return self._network.subnet if self._network else None

    @property
    def ctld_port(self) -> int | None:
        return self._ctld_port

    @property
    def env(self) -> dict[str, str]:
        """A fresh copy of the environment for Slurm commands against this cluster."""
        return clean_environ(os.environ, self.slurm_conf, self.nodes)

    @property
    def running(self) -> bool:
        return self._active

    def node_address(self, node: str) -> str:
        if not self._network:
            raise ClusterError("cluster not started")
        for n in self._network.nodes:
            if n.name == node:
                return n.address
        raise ClusterError(f"no node named {node!r} in this cluster ({', '.join(self.nodes)})")

    def __repr__(self) -> str:
        where = self._state_dir or "not started"
        return f"<LocalCluster {','.join(self.nodes[:2])}{'...' if len(self.nodes) > 2 else ''} at {where}>"

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ start
    def start(self) -> LocalCluster:
        """Start the cluster and return when every node is idle and an srun works."""
        if self._active:
            return self
        missing = missing_requirements()
        if missing:
            raise ClusterError("cannot start a local Slurm cluster: " + "; ".join(missing))
        if self.config.task_prolog and not os.access(self.config.task_prolog, os.X_OK):
            # checked here, not in ClusterConfig: a record must still load once the file is gone
            raise ClusterConfigError("task_prolog", str(self.config.task_prolog), "not an executable file")
        t0 = time.monotonic()
        if self._state_dir is None:
            self._state_dir = tempfile.mkdtemp(prefix=TEMP_PREFIX, dir="/tmp")
        elif os.path.exists(StateFiles(self._state_dir).record):
            # whatever an earlier run left here (crashed or still up) goes first
            try:
                previous = LocalCluster.attach(self._state_dir)
            except ClusterError as exc:
                raise ClusterError(
                    f"{exc}; stop it with the tfslurm that started it or pick another state dir"
                ) from exc
            previous.stop(purge=False)
        self._records, self._children, self.timings = [], {}, {}
        self._active = True
        atexit.register(self.stop)
        try:
            self._prepare_state_dir()
            self._start_all(t0)
        except BaseException as exc:
            tail = self.log_tail()
            try:
                self.stop(purge=False)
            except Exception:  # the original failure matters more
                pass
            logs = f"\n--- log tail ({self.state_dir}/log) ---\n{tail}" if tail else ""
            if isinstance(exc, ClusterError):
                raise ClusterError(f"{exc}{logs}") from exc
            if isinstance(exc, (OSError, subprocess.SubprocessError)):
                raise ClusterError(f"cluster start failed: {exc}{logs}") from exc
            raise
        self.timings["start"] = round(time.monotonic() - t0, 3)
        return self

    def _prepare_state_dir(self) -> None:
        files = self.files
        os.makedirs(self.state_dir, exist_ok=True)
        for sub in ("etc", "spool", "log", "run", "dev"):
            shutil.rmtree(files.path(sub), ignore_errors=True)
        for sub in ("etc", "spool/ctld", "log", "run", "dev"):
            os.makedirs(files.path(sub), exist_ok=True)
        for node in self.nodes:
            os.makedirs(files.path("spool", node), exist_ok=True)
        os.chmod(self.state_dir, 0o755)  # tasks of other users must traverse it
        for g in range(self.config.gpus):
            try:
                os.mknod(files.gpu_device(g), 0o600 | stat.S_IFCHR, os.makedev(195, g))
            except OSError as exc:
                raise ClusterError(
                    f"cannot create fake GPU {files.gpu_device(g)} ({exc}); use gpus=0"
                ) from exc

    def _start_all(self, t0: float) -> None:
        files = self.files
        with HostLock(timeout=max(60.0, self.config.timeout)):
            subnet = self.config.subnet
            if subnet is None:
                subnet = choose_subnet(self.state_dir)
            elif not subnet_free(subnet):
                raise ClusterError(f"subnet {subnet}.0/24 is already in use on this host; pick another")
            self._ctld_port = self.config.ctld_port or free_port(self.state_dir)
            self._network = Network.plan(self.state_dir, subnet, self.nodes, choose_tag(self.state_dir))
            self._write_record()  # from here on, `down` can clean up even after a crash
            self._write_files()
            self._network.setup(files.hosts)
            self._spawn("slurmctld", ["slurmctld", "-D"])
            self._wait("slurmctld to answer", self._ctld_up)
        self.timings["ctld_up"] = round(time.monotonic() - t0, 3)
        for node in self.nodes:
            self._spawn("slurmd", [*self._network.enter_argv(node), "slurmd", "-D", "-N", node], node=node)
        self._wait(f"all {len(self.nodes)} nodes to be idle", self._all_idle)
        self.timings["nodes_idle"] = round(time.monotonic() - t0, 3)
        if self.config.smoke_test:
            self._smoke_test()
            self.timings["first_srun"] = round(time.monotonic() - t0, 3)
            # the smoke job leaves the nodes "completing" for a moment; hand over idle nodes
            self._wait("the nodes to be idle after the smoke test", self._all_idle)
        self._write_record()

    def _write_files(self) -> None:
        files = self.files
        assert self._network is not None and self._ctld_port is not None
        _write(files.hosts, self._network.hosts_file_text(self._controller_host))
        _write(
            files.slurm_conf,
            slurm_conf(
                self.config,
                files,
                controller_host=self._controller_host,
                controller_addr=self._network.gateway,
                ctld_port=self._ctld_port,
                slurmd_port=self._ctld_port + 1,  # inside the nodes' own netns: always free
                node_addrs={n.name: n.address for n in self._network.nodes},
            ),
        )
        gres = gres_conf(self.config, files)
        if gres:
            _write(files.gres_conf, gres)
        _write(files.plugstack_conf, plugstack_conf(self.config))
        _write(
            files.path("env.sh"),
            f"# source me: points Slurm commands at the local cluster in {self.state_dir}\n"
            f"export SLURM_CONF={files.slurm_conf}\n",
        )

    def _spawn(self, name: str, argv: list[str], node: str | None = None) -> None:
        label = f"{name}-{node}" if node else name
        with open(self.files.path("log", f"{label}.stderr"), "wb") as err:
            proc = subprocess.Popen(
                argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the terminal must not hit the daemons
                cwd=self.state_dir,
            )
        started = procs.start_time(proc.pid)
        self._children[proc.pid] = proc
        if started is None:
            raise ClusterError(f"{label} exited at once (rc {proc.wait()})")
        self._records.append(procs.ProcessRecord(name, proc.pid, started, node))
        self._write_record()

    def _wait(self, what: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.config.timeout
        while True:
            for pid, child in self._children.items():
                if child.poll() is not None:
                    rec = next((r for r in self._records if r.pid == pid), None)
                    who = f"{rec.name} {rec.node or ''}".strip() if rec else str(pid)
                    raise ClusterError(f"{who} exited with code {child.returncode} while waiting for {what}")
            if ready():
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {self.config.timeout:g}s waiting for {what}")
            time.sleep(0.1)

    def _ctld_up(self) -> bool:
        out = self.run(["scontrol", "ping"], timeout=10)
        return "is UP" in out.stdout

    def _all_idle(self) -> bool:
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=10).stdout.split()
        states = dict(zip(out[::2], out[1::2], strict=False))
        return all(states.get(n) == "idle" for n in self.nodes)

    def _smoke_test(self) -> None:
        n = len(self.nodes)
        out = self.srun(f"-N{n}", "--ntasks-per-node=1", "-t", "1", "hostname", timeout=self.config.timeout)
        got = sorted(out.stdout.split())
        if out.returncode != 0 or got != sorted(self.nodes):
            raise ClusterError(
                f"smoke test `srun -N{n} hostname` failed (rc {out.returncode}): "
                f"stdout {out.stdout.strip()!r} stderr {out.stderr.strip()[-500:]!r}"
            )

    def detach(self) -> None:
        """Leave the cluster running when this process exits (``tfslurm cluster up``).

        By default a started cluster is stopped at interpreter exit, so a crashed script or
        test run does not leave daemons behind."""
        atexit.unregister(self.stop)
        self.ephemeral = False
        self._write_record()

    # ------------------------------------------------------------------ records
    def _write_record(self) -> None:
        record = {
            "config": self.config.as_dict(),
            "state_dir": self.state_dir,
            "subnet": self.subnet,
            "net_tag": self._network.tag if self._network else None,
            "ctld_port": self._ctld_port,
            "processes": [r.to_json() for r in self._records],
            "owner_pid": os.getpid(),
            "owner_start_time": procs.start_time(os.getpid()),
            "ephemeral": self.ephemeral,
            "timings": self.timings,
        }
        path = self.files.record
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _write(path + ".tmp", json.dumps(record, indent=1))
        os.replace(path + ".tmp", path)

    @classmethod
    def attach(cls, state_dir: str) -> LocalCluster:
        """The cluster recorded in ``state_dir`` (running or not), e.g. to stop it."""
        state_dir = os.path.normpath(state_dir)
        try:
            with open(StateFiles(state_dir).record, encoding="utf-8") as f:
                record = json.load(f)
        except FileNotFoundError:
            raise ClusterError(f"no local cluster recorded in {state_dir}") from None
        except (OSError, ValueError) as exc:
            raise ClusterError(f"cannot read {StateFiles(state_dir).record}: {exc}") from exc
        try:  # a record of another tfslurm version (or edited by hand)
            config = ClusterConfig(**record["config"])
            records = [procs.ProcessRecord.from_json(p) for p in record.get("processes", [])]
            timings = dict(record.get("timings") or {})
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ClusterError(
                f"{StateFiles(state_dir).record} is not a cluster record this version can read "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        cluster = cls(config)
        cluster._state_dir = state_dir
        cluster.ephemeral = bool(record.get("ephemeral"))
        cluster._ctld_port = record.get("ctld_port")
        cluster._records = records
        if record.get("subnet"):
            tag = record.get("net_tag")
            cluster._network = Network.plan(state_dir, record["subnet"], config.node_names(), tag)
        cluster.timings = timings
        cluster._active = True
        cluster._owner = (record.get("owner_pid"), record.get("owner_start_time"))
        return cluster

    def owner_alive(self) -> bool:
        """Whether the process that started this cluster still runs."""
        pid, started = self._owner
        return pid is not None and procs.start_time(pid) == started

    def live_daemons(self) -> list[procs.ProcessRecord]:
        if self._state_dir is None:
            return []
        return [r for r in self._records if procs.is_ours(r, self.slurm_conf)]

    def status(self) -> dict[str, Any]:
        """What is up: live daemons, node states as slurmctld sees them, leftovers."""
        live = self.live_daemons()
        info: dict[str, Any] = {
            "state_dir": self.state_dir,
            "nodes": self.nodes,
            "subnet": self.subnet,
            "net_tag": self._network.tag if self._network else None,
            "ctld_port": self._ctld_port,
            "daemons": {f"{r.name}{'@' + r.node if r.node else ''}": r.pid for r in live},
            "expected_daemons": len(self.nodes) + 1,
            "node_states": {},
        }
        if any(r.name == "slurmctld" for r in live):
            try:
                out = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=10).stdout.split()
                info["node_states"] = dict(zip(out[::2], out[1::2], strict=False))
            except ClusterError:
                pass
        info["healthy"] = len(live) == info["expected_daemons"] and all(
            info["node_states"].get(n) in ("idle", "mixed", "allocated") for n in self.nodes
        )
        return info

    # ------------------------------------------------------------------ stop
    def stop(self, purge: bool | None = None) -> None:
        """Stop everything this cluster started; idempotent. ``purge`` removes the state dir
        (default: only for a temporary state dir the cluster created itself)."""
        atexit.unregister(self.stop)
        if not self._active or self._state_dir is None:
            return
        t0 = time.monotonic()
        live = self.live_daemons()
        ctld_alive = any(r.name == "slurmctld" for r in live)
        if ctld_alive and any(r.name == "slurmd" for r in live):
            self._cancel_jobs()
        family = procs.descendants(r.pid for r in live)
        procs.terminate([r.pid for r in live], grace=10, reap=self._reap)
        # our own unreaped children that never became a recognisable daemon (an nsenter
        # stopped before its exec): their PIDs cannot have been reused
        procs.terminate([p for p, c in self._children.items() if c.poll() is None], grace=1, reap=self._reap)
        # children a daemon did not take down with it (slurmscriptd, a wedged slurmstepd)
        procs.terminate([p for p, started in family if procs.start_time(p) == started], grace=1)
        if self._network:
            # wedged slurmstepds and orphaned tasks: whatever still runs inside our nodes
            stragglers = procs.pids_in_netns(self._network.netns_inodes())
            procs.terminate(stragglers, grace=1)
            self._network.teardown()
        for pid in list(self._children):
            self._reap(pid)
        self._active = False
        if os.path.exists(self.slurm_conf):
            # A client still pointed at this cluster must fail at once (the unknown key is a
            # fatal parse error) instead of sending packets for the vanished bridge address
            # out of the default route.
            os.replace(self.slurm_conf, self.slurm_conf + ".stopped")
            _write(self.slurm_conf, STOPPED_CONF)
        self.timings["stop"] = round(time.monotonic() - t0, 3)
        for name in os.listdir(self.files.path("run")) if os.path.isdir(self.files.path("run")) else []:
            if name.endswith(".pid"):
                os.unlink(self.files.path("run", name))
        if purge is None:
            purge = self.ephemeral
        if purge and self._network and not self._network.leftovers():
            shutil.rmtree(self.state_dir, ignore_errors=True)
        elif os.path.isdir(self.files.path("run")):
            self._records = []
            self._write_record()

    def _cancel_jobs(self) -> None:
        try:
            jobs = self.run(["squeue", "-h", "-o", "%A"], timeout=10).stdout.split()
            if not jobs:
                return
            self.run(["scancel", *sorted(set(jobs))], timeout=10)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if not self.run(["squeue", "-h", "-o", "%A"], timeout=10).stdout.split():
                    return
                time.sleep(0.1)
        except ClusterError:
            pass  # the daemons get stopped regardless

    def _reap(self, pid: int) -> None:
        child = self._children.get(pid)
        if child is not None and child.poll() is not None:
            del self._children[pid]

    # ------------------------------------------------------------------ using it
    def popen(
        self, argv: Sequence[str], env_extra: Mapping[str, str] | None = None, **kwargs: Any
    ) -> subprocess.Popen[Any]:
        """Start ``argv`` (e.g. a long srun) in the background with the cluster's env."""
        env = self.env
        env.update(env_extra or {})
        return subprocess.Popen(list(argv), env=env, **kwargs)

    def run(
        self,
        argv: Sequence[str],
        timeout: float = 60,
        input: str | None = None,
        env_extra: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run any command (srun, sbatch, squeue...) against this cluster; never raises for
        a non-zero exit, raises ClusterTimeout after terminating it on timeout."""
        env = self.env
        env.update(env_extra or {})
        proc = subprocess.Popen(
            list(argv),
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            # SIGTERM first: srun then cancels its step instead of leaving it running
            proc.send_signal(signal.SIGTERM)
            try:
                out, err = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            raise ClusterTimeout(
                f"{' '.join(argv)!s} timed out after {timeout:g}s; stderr: {(err or '').strip()[-800:]}",
                out or "",
                err or "",
            ) from None
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)

    def srun(
        self,
        *args: str,
        timeout: float = 60,
        env_extra: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``srun ARGS`` with the cluster's environment (see :meth:`run`)."""
        return self.run(["srun", *args], timeout=timeout, env_extra=env_extra, cwd=cwd)

    def sbatch(
        self, script_text: str, *args: str, cwd: str | None = None, env_extra: Mapping[str, str] | None = None
    ) -> int:
        """Submit ``script_text`` (via stdin) and return the job id."""
        out = self.run(
            ["sbatch", "--parsable", *args], input=script_text, cwd=cwd, env_extra=env_extra, timeout=60
        )
        first = out.stdout.strip().split(";")[0]
        if out.returncode != 0 or not first.isdigit():
            raise ClusterError(
                f"sbatch {' '.join(args)} failed (rc {out.returncode}): {out.stderr.strip()[-800:]}"
            )
        return int(first)

    def job_states(self, job_id: int) -> list[str]:
        """JobState of every component of ``job_id`` (one entry, or one per het component)."""
        out = self.run(["scontrol", "-o", "show", "job", str(job_id)], timeout=10)
        if out.returncode != 0:
            raise ClusterError(f"scontrol show job {job_id}: {out.stderr.strip()}")
        states = []
        for line in out.stdout.splitlines():
            for word in line.split():
                if word.startswith("JobState="):
                    states.append(word.split("=", 1)[1])
        return states

    def wait_idle(self, timeout: float = 60) -> None:
        """Wait until every node is idle: a job that ended may leave its nodes completing for
        a moment, and a job started then gets other nodes than on an idle cluster."""
        deadline = time.monotonic() + timeout
        while not self._all_idle():
            if time.monotonic() > deadline:
                raise ClusterTimeout(f"nodes not all idle after {timeout:g}s")
            time.sleep(0.2)

    def wait_job(self, job_id: int, timeout: float = 120) -> str:
        """Poll until the job ends; return its final state (e.g. COMPLETED, FAILED)."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.job_states(job_id)
            if states and all(s in TERMINAL_STATES for s in states):
                bad = [s for s in states if s != "COMPLETED"]
                return bad[0] if bad else "COMPLETED"
            if time.monotonic() > deadline:
                raise ClusterTimeout(f"job {job_id} still {','.join(states) or 'unknown'} after {timeout:g}s")
            time.sleep(0.2)

    def node_argv(self, node: str, argv: Sequence[str]) -> list[str]:
        """``argv`` wrapped to run inside ``node``'s namespaces (for Popen)."""
        if not self._network:
            raise ClusterError("cluster not started")
        return self._network.enter_argv(node) + list(argv)

    def on_node(
        self,
        node: str,
        argv: Sequence[str],
        timeout: float = 60,
        input: str | None = None,
        env_extra: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside ``node`` (its hostname, address and /etc/hosts), not via Slurm."""
        return self.run(
            self.node_argv(node, argv), timeout=timeout, input=input, env_extra=env_extra, cwd=cwd
        )

    def log_tail(self, lines: int = 12, max_chars: int = 4000) -> str:
        """The last lines of every daemon log (for error messages)."""
        if self._state_dir is None:
            return ""
        log_dir = self.files.path("log")
        chunks = []
        for name in sorted(os.listdir(log_dir)) if os.path.isdir(log_dir) else []:
            try:
                with open(os.path.join(log_dir, name), errors="replace") as f:
                    tail = f.read()[-20000:].splitlines()[-lines:]
            except OSError:
                continue
            if tail:
                chunks.append(f"== {name}\n" + "\n".join(tail))
        text = "\n".join(chunks)
        return text[-max_chars:]


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
