"""What this machine gives a local cluster: the programs it needs, Slurm's version, a clean
environment for Slurm's commands, and the host-wide lock and free ports that let several
clusters start side by side."""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence

from tfslurm.errors import ClusterError
from tfslurm.localcluster.netns import name_hash

LOCK_FILE = "/tmp/tfslurm-localcluster.lock"  # serialises picking ports and subnets
SLURM_ENV_PREFIXES = ("SLURM_", "SLURMD_", "SBATCH_", "SALLOC_", "SRUN_", "SPANK_")
DAEMONS = ("slurmctld", "slurmd")
CLIENTS = ("srun", "sbatch", "sinfo", "squeue", "scontrol", "scancel")
TOOLS = ("ip", "unshare", "nsenter")
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])


def missing_requirements() -> list[str]:
    """Why a cluster cannot start here (empty list = it can)."""
    missing = []
    if os.environ.get("TFSLURM_NO_CLUSTER"):
        missing.append("disabled by TFSLURM_NO_CLUSTER")
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        missing.append("needs root (network namespaces, device nodes, slurmd starting tasks)")
    absent = [b for b in DAEMONS + CLIENTS if not shutil.which(b, path=SEARCH_PATH)]
    if absent:
        missing.append(f"Slurm not installed (no {', '.join(absent)}; apt-get install slurm-wlm)")
    absent = [b for b in TOOLS if not shutil.which(b, path=SEARCH_PATH)]
    if absent:
        missing.append(f"missing {', '.join(absent)} (apt-get install iproute2 util-linux)")
    return missing


def slurm_version() -> str:
    """``major.minor`` of the installed Slurm (``slurmd -V``, which needs no slurm.conf), e.g. ``24.11``."""
    slurmd = shutil.which("slurmd", path=SEARCH_PATH)
    if slurmd is None:
        raise ClusterError("Slurm not installed (no slurmd; apt-get install slurm-wlm)")
    words = subprocess.run([slurmd, "-V"], capture_output=True, text=True, timeout=30).stdout.split()
    parts = words[-1].split(".") if words else []
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ClusterError(f"cannot read Slurm's version from `slurmd -V`: {' '.join(words)!r}")
    return f"{int(parts[0]):02d}.{int(parts[1]):02d}"


def clean_environ(base: Mapping[str, str], slurm_conf_path: str, node_names: Sequence[str]) -> dict[str, str]:
    """``base`` minus any outer Slurm job's variables, plus our SLURM_CONF and no_proxy."""
    env = {k: v for k, v in base.items() if not k.startswith(SLURM_ENV_PREFIXES)}
    env["SLURM_CONF"] = slurm_conf_path
    for key in ("no_proxy", "NO_PROXY"):
        entries = [e for e in env.get(key, "").split(",") if e]
        for host in ["127.0.0.1", "localhost", *node_names]:
            if host not in entries:
                entries.append(host)
        env[key] = ",".join(entries)
    return env


class HostLock:
    """An flock on LOCK_FILE: only one cluster at a time picks a port/subnet and binds it."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.fd = -1

    def __enter__(self) -> HostLock:
        old = os.umask(0)
        try:
            self.fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
        finally:
            os.umask(old)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(self.fd)
                    raise ClusterError(
                        f"timed out waiting for {LOCK_FILE} (another cluster starting?)"
                    ) from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # releases the flock


def free_port(state_dir: str) -> int:
    """A controller port derived from the state dir, probed free (and its successor)."""
    span = 8000
    start = int(name_hash(state_dir), 16) % span
    for k in range(span):
        port = 21000 + (start + k) % span
        if port_free(port) and port_free(port + 1):
            return port
    raise ClusterError("no free TCP port in 21000-28999 for slurmctld")


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True
